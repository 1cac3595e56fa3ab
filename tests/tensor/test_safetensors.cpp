// tests/tensor/test_safetensors.cpp — the safetensors reader/writer against the format as
// specified (bytes built by hand here), round trips over every dtype, corrupt files giving
// clear errors, and the atomic write keeping the old file when writing fails (through the
// documented fault hook: a full disk or failing fsync/close/rename cannot be produced
// reliably in a test otherwise, and root ignores read-only directories).
#include <gtest/gtest.h>

#include "testing.h"
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/safetensors.h"

namespace stretch {
namespace {

namespace fs = std::filesystem;
using safetensors_testing::FaultStage;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("stretch_safetensors_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    safetensors_testing::set_write_fault({});
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

// A file exactly as the format describes: u64 LE header length, header, data.
std::string make_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

using stretch::testing::error_of;

TEST_F(Safetensors, WriterProducesTheSpecifiedBytes) {
  Tensor a = Tensor::empty({2});
  a.f32()[0] = 1.0f;
  a.f32()[1] = 2.0f;
  save_safetensors(path("a.safetensors"), {{"a", a}}, {{"k", "v"}});
  // Header keys in sorted order, padded with spaces to a multiple of 8 (79 -> 80 bytes).
  const std::string expected =
      make_file(R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})", floats({1.0f, 2.0f}));
  const std::string got = read_bytes(path("a.safetensors"));
  EXPECT_EQ(got.size(), 8u + 80u + 8u);
  EXPECT_EQ(got.substr(8 + 79, 1), " ");
  EXPECT_EQ(got, expected);
}

TEST_F(Safetensors, ReaderReadsAHandBuiltFile) {
  // Two tensors, listed out of data order, with metadata; I32 then F32.
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]},"ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
      R"("__metadata__":{"update":"12","config":"{\"lr\": 1.0}"}})";
  int32_t ids[2] = {7, -3};
  std::string data(reinterpret_cast<const char*>(ids), 8);
  data += floats({0.5f, -4.25f});
  write_bytes(path("h.safetensors"), make_file(header, data));
  SafetensorsFile f = load_safetensors(path("h.safetensors"));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "ids");  // data-offset order
  EXPECT_EQ(f.get("ids").dtype(), DType::I32);
  EXPECT_EQ(f.get("ids").i32()[1], -3);
  EXPECT_EQ(f.get("w").shape(), Shape({1, 2}));
  EXPECT_EQ(f.get("w").f32()[1], -4.25f);
  EXPECT_EQ(f.metadata.at("update"), "12");
  EXPECT_EQ(f.metadata.at("config"), "{\"lr\": 1.0}");
  std::string e = error_of([&] { f.get("nope"); });
  EXPECT_NE(e.find("h.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("'nope'"), std::string::npos) << e;
}

TEST_F(Safetensors, RoundTripEveryDtypeAndEdgeShape) {
  NamedTensors ts;
  Tensor f32 = Tensor::empty({2, 3});
  for (int i = 0; i < 6; ++i) f32.f32()[i] = 0.25f * i - 1.0f;
  Tensor i32 = Tensor::empty({4}, DType::I32);
  for (int i = 0; i < 4; ++i) i32.i32()[i] = -1000000 * i + 3;
  Tensor b16 = Tensor::empty({3}, DType::BF16);
  for (int i = 0; i < 3; ++i) b16.bf()[i] = float_to_bf16(1.5f * i);
  Tensor i64 = Tensor::empty({2}, DType::I64);
  i64.i64()[0] = int64_t{1} << 40;
  i64.i64()[1] = -5;
  Tensor u8 = Tensor::empty({5}, DType::U8);
  for (int i = 0; i < 5; ++i) u8.u8()[i] = static_cast<uint8_t>(250 + i);
  Tensor scalar = Tensor::full({}, 3.5f);
  Tensor empty = Tensor::empty({0, 4});
  ts = {{"u8", u8}, {"f32", f32}, {"bf16", b16}, {"i64", i64}, {"scalar", scalar}, {"empty", empty}, {"i32", i32}};
  save_safetensors(path("rt.safetensors"), ts, {{"a", "1"}, {"unicode", "λ→∞"}});
  SafetensorsFile f = load_safetensors(path("rt.safetensors"));
  ASSERT_EQ(f.tensors.size(), ts.size());
  for (const auto& [name, t] : ts) {
    const Tensor& g = f.get(name);
    EXPECT_EQ(g.dtype(), t.dtype()) << name;
    EXPECT_EQ(g.shape(), t.shape()) << name;
    ASSERT_EQ(g.nbytes(), t.nbytes()) << name;
    if (t.nbytes()) {
      EXPECT_EQ(0, std::memcmp(g.bytes(), t.bytes(), t.nbytes())) << name;
    }
  }
  EXPECT_EQ(f.metadata.at("unicode"), "λ→∞");
  // Layout: header length a multiple of 8, each tensor aligned to its element size.
  const std::string raw = read_bytes(path("rt.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(raw.substr(8, n));
  for (const auto& [name, t] : ts) EXPECT_EQ(header[name]["data_offsets"][0].get<uint64_t>() % dtype_size(t.dtype()), 0u) << name;
  // Saving again over the file replaces it; no temporary file is left behind.
  save_safetensors(path("rt.safetensors"), {{"only", scalar}});
  EXPECT_EQ(load_safetensors(path("rt.safetensors")).tensors.size(), 1u);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename(), "rt.safetensors");
  }
}

TEST_F(Safetensors, CorruptFilesGiveClearErrors) {
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string good = make_file(good_header, floats({1, 2}));
  struct Case {
    std::string name, bytes, expect;
  } cases[] = {
      {"short", "abc", "too short for the 8-byte header length at byte offset 0"},
      {"truncated_data", good.substr(0, good.size() - 3), "runs past the end of the file"},
      {"huge_header_len", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "exceeds the 100 MB limit"},
      {"header_past_end", std::string("\x40\x00\x00\x00\x00\x00\x00\x00", 8) + "{}      ", "runs past the end of the"},
      // The second comma is header byte 20, file byte 8 + 20.
      {"bad_json", make_file(R"({"a":{"dtype":"F32",,}})", ""), "JSON header is invalid near byte offset 28"},
      {"not_object", make_file("[1,2]", ""), "is not an object"},
      // nlohmann throws out_of_range, not parse_error, for a number past double (fuzz finding).
      {"number_overflow", make_file(R"({"a":1e999})", ""), "is invalid: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
      {"overlap", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            floats({1, 2})),
       "inside tensor 'a'"},
      {"gap", make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", floats({1, 2})), "belong to no tensor"},
      {"trailing", make_file(good_header, floats({1, 2, 3})), "tensor data ends at byte offset"},
      {"size_mismatch", make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats({1, 2})),
       "needs 12 bytes but data_offsets span 8"},
      {"unknown_dtype", make_file(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", floats({1, 2})),
       "dtype F16, which stretch does not read"},
      {"negative_dim", make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", floats({1, 2})),
       "not a non-negative integer"},
      {"bad_offsets", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", floats({1, 2})), "end before they begin"},
      {"bad_metadata", make_file(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", floats({1, 2})),
       "is not a string"},
  };
  for (const Case& c : cases) {
    const std::string p = path(c.name + ".safetensors");
    write_bytes(p, c.bytes);
    const std::string e = error_of([&] { load_safetensors(p); });
    EXPECT_NE(e.find(p), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  EXPECT_NE(error_of([&] { load_safetensors(path("missing.safetensors")); }).find("cannot open"), std::string::npos);
  write_bytes(path("ok.safetensors"), good);
  EXPECT_EQ(load_safetensors(path("ok.safetensors")).get("a").f32()[1], 2.0f);
}

TEST_F(Safetensors, FailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  const std::string p = path("ckpt.safetensors");
  Tensor old_t = Tensor::full({3}, 1.0f);
  save_safetensors(p, {{"w", old_t}}, {{"update", "1"}});
  const std::string old_bytes = read_bytes(p);
  Tensor new_t = Tensor::full({1000}, 2.0f);
  struct Case {
    FaultStage stage;
    int64_t after;
    int err;
    std::string expect;
  } cases[] = {
      {FaultStage::Write, 0, ENOSPC, "No space left on device"},
      {FaultStage::Write, 100, ENOSPC, "could not write byte 100 of"},
      {FaultStage::Write, 2000, EIO, "Input/output error"},
      {FaultStage::Fsync, 0, EIO, "fsync"},
      {FaultStage::Close, 0, EDQUOT, "could not close"},
      {FaultStage::Rename, 0, EACCES, "could not rename"},
  };
  for (const Case& c : cases) {
    safetensors_testing::set_write_fault({c.stage, c.after, c.err});
    std::string e;
    try {
      save_safetensors(p, {{"w", new_t}}, {{"update", "2"}});
      e = "(no error)";
    } catch (const Error& err) {
      e = err.what();
      EXPECT_EQ(err.kind(), ErrorKind::Io);
    }
    safetensors_testing::set_write_fault({});
    EXPECT_NE(e.find(p), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << e;
    EXPECT_NE(e.find("is unchanged"), std::string::npos) << e;
    EXPECT_EQ(read_bytes(p), old_bytes) << "stage " << static_cast<int>(c.stage);
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      ++files;
      EXPECT_EQ(entry.path().filename(), "ckpt.safetensors");
    }
    EXPECT_EQ(files, 1);
  }
  save_safetensors(p, {{"w", new_t}}, {{"update", "2"}});
  EXPECT_EQ(load_safetensors(p).metadata.at("update"), "2");
}

TEST_F(Safetensors, WriterRejectsBadInput) {
  Tensor t = Tensor::full({1}, 1.0f);
  EXPECT_NE(error_of([&] { save_safetensors(path("x"), {{"a", t}, {"a", t}}); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { save_safetensors(path("x"), {{"", t}}); }).find("empty name"), std::string::npos);
  EXPECT_NE(error_of([&] { save_safetensors(path("x"), {{"__metadata__", t}}); }).find("__metadata__"), std::string::npos);
  EXPECT_NE(error_of([&] { save_safetensors(path("x"), {{"u", Tensor()}}); }).find("undefined"), std::string::npos);
  std::string e = error_of([&] { save_safetensors(path("no/such/dir/x.safetensors"), {{"a", t}}); });
  EXPECT_NE(e.find("could not create the temporary file"), std::string::npos) << e;
  EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;
}

}  // namespace
}  // namespace stretch
