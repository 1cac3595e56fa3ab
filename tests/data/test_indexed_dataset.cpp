// fairseq MMIDIDX v1 reader and writer (indexed_dataset.h): exact bytes of a small file
// written by hand from the layout, every dtype, and every kind of damage with its message.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data_test_util.h"

namespace stretch::data {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_items(const std::string& prefix, DTypeCode dtype, const std::vector<std::vector<int32_t>>& items) {
  IndexedDatasetWriter w(prefix, dtype);
  for (const auto& it : items) w.add_item(it.data(), static_cast<int32_t>(it.size()));
  w.finish();
}

TEST(IndexedDataset, ExactBytesOfASmallFile) {
  TempDir dir;
  write_items(dir / "s", DTypeCode::U16, {{5, 6, 2}, {2}});
  // .idx: magic, u64 1, u8 8 (uint16), u64 2, int32 sizes {3, 1}, int64 pointers {0, 6}.
  std::string want("MMIDIDX\0\0", 9);
  auto put = [&want](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) want += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(1, 8);
  put(8, 1);
  put(2, 8);
  put(3, 4);
  put(1, 4);
  put(0, 8);
  put(6, 8);
  EXPECT_EQ(read_file(dir / "s.idx"), want);
  EXPECT_EQ(read_file(dir / "s.bin"), std::string("\x05\x00\x06\x00\x02\x00\x02\x00", 8));
}

TEST(IndexedDataset, RoundTripEveryIntegerDtype) {
  TempDir dir;
  const std::vector<std::vector<int32_t>> items = {{0, 1, 2}, {}, {127}, {3, 4, 5, 6, 7, 2}};
  for (DTypeCode c : {DTypeCode::U8, DTypeCode::I8, DTypeCode::I16, DTypeCode::I32, DTypeCode::I64, DTypeCode::F64,
                      DTypeCode::Double, DTypeCode::U16, DTypeCode::U32, DTypeCode::U64}) {
    const std::string prefix = dir / (std::string("d") + dtype_code_name(c));
    write_items(prefix, c, items);
    auto ds = IndexedDataset::open(prefix);
    EXPECT_EQ(ds->dtype(), c);
    ASSERT_EQ(ds->num_items(), 4);
    EXPECT_EQ(ds->total_tokens(), 10);
    EXPECT_EQ(ds->sizes(), (std::vector<int32_t>{3, 0, 1, 6}));
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(ds->item(i), items[static_cast<size_t>(i)]) << dtype_code_name(c);
    EXPECT_EQ(ds->tokens(2, 4), (std::vector<int32_t>{2, 127, 3, 4}));
    ds->validate_ids(128);
    EXPECT_NE(error_of([&] { ds->validate_ids(127); }).find("token id 127"), std::string::npos);
  }
  EXPECT_EQ(dtype_for_vocab(65499), DTypeCode::U16);
  EXPECT_EQ(dtype_for_vocab(65500), DTypeCode::U32);
  EXPECT_EQ(dtype_for_vocab(267744), DTypeCode::U32);
  EXPECT_EQ(dtype_for_vocab(4294967295LL), DTypeCode::I64);
}

TEST(IndexedDataset, EmptyDataset) {
  TempDir dir;
  write_items(dir / "e", DTypeCode::U16, {});
  auto ds = IndexedDataset::open(dir / "e");
  EXPECT_EQ(ds->num_items(), 0);
  EXPECT_EQ(ds->total_tokens(), 0);
  ds->validate_ids(8);
}

class Damaged : public ::testing::Test {
 protected:
  void SetUp() override {
    write_items(dir_ / "d", DTypeCode::U16, {{4, 5, 2}, {6, 2}, {2}});
    idx_ = read_file(dir_ / "d.idx");
    bin_ = read_file(dir_ / "d.bin");
    ASSERT_EQ(idx_.size(), 26u + 12u * 3u);
  }
  std::string open_error() { return error_of([&] { IndexedDataset::open(dir_ / "d"); }); }
  TempDir dir_;
  std::string idx_, bin_;
};

TEST_F(Damaged, TruncatedIndexAtEveryLength) {
  for (size_t len = 0; len < idx_.size(); ++len) {
    write_file(dir_ / "d.idx", idx_.substr(0, len));
    const std::string e = open_error();
    EXPECT_NE(e.find("d.idx"), std::string::npos) << len << ": " << e;
    EXPECT_NE(e.find("truncated"), std::string::npos) << len << ": " << e;
  }
}

TEST_F(Damaged, TrailingBytesInIndex) {
  write_file(dir_ / "d.idx", idx_ + "x");
  const std::string e = open_error();
  EXPECT_NE(e.find("1 unexpected bytes after byte offset 62"), std::string::npos) << e;
}

TEST_F(Damaged, WrongMagicVersionDtype) {
  std::string m = idx_;
  m[0] = 'X';
  write_file(dir_ / "d.idx", m);
  std::string e = open_error();
  EXPECT_NE(e.find("d.idx: wrong magic at byte offset 0"), std::string::npos) << e;
  m = idx_;
  m[9] = 2;
  write_file(dir_ / "d.idx", m);
  e = open_error();
  EXPECT_NE(e.find("unsupported version 2 at byte offset 9"), std::string::npos) << e;
  m = idx_;
  m[17] = 11;
  write_file(dir_ / "d.idx", m);
  e = open_error();
  EXPECT_NE(e.find("unknown dtype code 11 at byte offset 17"), std::string::npos) << e;
}

TEST_F(Damaged, BadSizesAndPointers) {
  std::string m = idx_;
  const int32_t neg = -1;
  std::memcpy(&m[26 + 4], &neg, 4);
  write_file(dir_ / "d.idx", m);
  std::string e = open_error();
  EXPECT_NE(e.find("negative size -1 of item 1 at byte offset 30"), std::string::npos) << e;
  m = idx_;
  const int64_t ptr = 7;
  std::memcpy(&m[26 + 12 + 8], &ptr, 8);
  write_file(dir_ / "d.idx", m);
  e = open_error();
  EXPECT_NE(e.find("pointer of item 1 at byte offset 46 is 7, expected 6"), std::string::npos) << e;
}

TEST_F(Damaged, TruncatedOrOversizedBin) {
  write_file(dir_ / "d.bin", bin_.substr(0, 7));
  std::string e = open_error();
  EXPECT_NE(e.find("d.bin: truncated: the file ends at byte offset 7"), std::string::npos) << e;
  EXPECT_NE(e.find("item 1 is cut"), std::string::npos) << e;
  write_file(dir_ / "d.bin", bin_ + "zz");
  e = open_error();
  EXPECT_NE(e.find("d.bin: has 2 bytes after byte offset 12"), std::string::npos) << e;
  std::filesystem::remove(dir_ / "d.bin");
  e = open_error();
  EXPECT_NE(e.find("d.bin: no such file"), std::string::npos) << e;
}

TEST_F(Damaged, TokenIdOutsideDictionary) {
  std::string b = bin_;
  b[6] = 9;  // item 1, position 0 (was 6)
  write_file(dir_ / "d.bin", b);
  auto ds = IndexedDataset::open(dir_ / "d");
  ds->validate_ids(10);
  const std::string e = error_of([&] { ds->validate_ids(8, "dict.txt"); });
  EXPECT_NE(e.find("d.bin: token id 9 at byte offset 6 (item 1, position 0) is not an id of dict.txt (size 8)"),
            std::string::npos)
      << e;
}

// tests/fuzz/corpus/mmidx/crash-nan-f64: a float64 .bin holding NaN, ±inf or 1e300 was converted to
// int32 by a cast (undefined behaviour; UBSan in the sanitizer build). Now such a token reads as
// -1 and validate_ids names it with its byte offset.
TEST(IndexedDataset, FloatTokensWithoutAnInt32ValueReadAsInvalid) {
  TempDir dir;
  write_items(dir / "f", DTypeCode::F64, {{4, 5, 2}});
  std::string b = read_file(dir / "f.bin");
  const double bad[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), -1e300};
  for (double v : bad) {
    std::string m = b;
    std::memcpy(&m[8], &v, 8);  // item 0, position 1
    write_file(dir / "f.bin", m);
    auto ds = IndexedDataset::open(dir / "f");
    EXPECT_EQ(ds->item(0), (std::vector<int32_t>{4, -1, 2})) << v;
    const std::string e = error_of([&] { ds->validate_ids(8, "dict.txt"); });
    EXPECT_NE(e.find("at byte offset 8 (item 0, position 1) is not an id of dict.txt"), std::string::npos) << e;
  }
}

TEST(MemoryTokenStream, OffsetsAndReads) {
  MemoryTokenStream s({{1, 2}, {}, {3}});
  EXPECT_EQ(s.num_items(), 3);
  EXPECT_EQ(s.total_tokens(), 3);
  EXPECT_EQ(s.item_offsets(), (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(s.item(2), std::vector<int32_t>{3});
  EXPECT_THROW(s.tokens(2, 2), Error);
}

}  // namespace
}  // namespace stretch::data
