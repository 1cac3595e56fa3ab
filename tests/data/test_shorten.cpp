// --shorten-method (data/shorten.h). Expected values printed by CPython 3.11.2 and numpy 1.24.2 (the
// fairseq venv), not by the code under test:
//   hash((1, 0, 0)) % 1e6 ... (python3 -c "print(int(hash((1, 0, 0)) % 1e6))")
//   with fairseq.data.data_utils.numpy_seed(seed, epoch, index): np.random.randint(0, excess)
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "core/error.h"
#include "data/shorten.h"

namespace stretch::data {
namespace {

TEST(Shorten, PythonTupleSeedIsCPythonsHashModulo1e6) {
  EXPECT_EQ(python_tuple_seed({1, 0, 0}), 974528u);       // hash 7839147235533974352
  EXPECT_EQ(python_tuple_seed({1, 0, 5}), 657408u);       // hash -5269180010799342849 (negative)
  EXPECT_EQ(python_tuple_seed({1, 1, 7}), 979136u);
  EXPECT_EQ(python_tuple_seed({2, 0, 123456}), 845184u);
  EXPECT_EQ(python_tuple_seed({7, 3, 99999}), 773568u);  // hash -3003098428734226392
}

TEST(Shorten, RandomCropStartIsNumpysRandint) {
  // (seed, epoch, index, excess) -> np.random.randint(0, excess) under numpy_seed(seed, epoch, index)
  EXPECT_EQ(random_crop_start(10 + 8, 8, 1, 0, 0), 3);
  EXPECT_EQ(random_crop_start(3 + 8, 8, 1, 0, 5), 2);
  EXPECT_EQ(random_crop_start(1000 + 8, 8, 2, 0, 17), 968);
  EXPECT_EQ(random_crop_start(1 + 8, 8, 1, 0, 3), 0);  // excess 1: randint(0, 1) is 0
  EXPECT_EQ(random_crop_start(70000 + 8, 8, 5, 0, 42), 31619);
  EXPECT_EQ(random_crop_start(8, 8, 5, 0, 42), 0);  // not longer than L: kept whole
}

TEST(Shorten, SplitListIsFairseqs) {
  EXPECT_TRUE(shortens_split("", "train"));
  EXPECT_TRUE(shortens_split("train,valid", "valid"));
  EXPECT_FALSE(shortens_split("train,valid", "test"));
  EXPECT_FALSE(shortens_split("train", "train1"));
}

// items: 0 has 18 tokens (excess 10), 1 has 3, 2 is empty, 3 has 8 (= L), 4 has 9 (excess 1), 5 has 11 (excess 3)
std::shared_ptr<const TokenStream> items() {
  std::vector<std::vector<int32_t>> v;
  int32_t next = 100;
  for (int n : {18, 3, 0, 8, 9, 11}) {
    std::vector<int32_t> item(static_cast<size_t>(n));
    std::iota(item.begin(), item.end(), next);
    next += 100;
    v.push_back(item);
  }
  return std::make_shared<MemoryTokenStream>(v);
}

std::vector<int32_t> range(int32_t from, int n) {
  std::vector<int32_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), from);
  return r;
}

TEST(Shorten, TruncateKeepsTheFirstTokens) {
  ShortenedTokenStream s(items(), {.method = ShortenMethod::Truncate, .length = 8, .seed = 1});
  ASSERT_EQ(s.num_items(), 6);
  EXPECT_EQ(s.shortened_items(), 3);
  EXPECT_EQ(s.item(0), range(100, 8));
  EXPECT_EQ(s.item(1), range(200, 3));
  EXPECT_EQ(s.item(2), range(300, 0));
  EXPECT_EQ(s.item(3), range(400, 8));
  EXPECT_EQ(s.item(4), range(500, 8));
  EXPECT_EQ(s.item(5), range(600, 8));
  EXPECT_EQ(s.total_tokens(), 8 + 3 + 0 + 8 + 8 + 8);
  // a read across items (and the empty one)
  std::vector<int32_t> want = range(106, 2);
  for (int32_t t : range(200, 3)) want.push_back(t);
  for (int32_t t : range(400, 4)) want.push_back(t);
  EXPECT_EQ(s.tokens(6, 9), want);
}

TEST(Shorten, RandomCropTakesFairseqsCrops) {
  ShortenedTokenStream s(items(), {.method = ShortenMethod::RandomCrop, .length = 8, .seed = 1});
  EXPECT_EQ(s.item(0), range(100 + 3, 8));  // (1, 0, 0), excess 10 -> 3
  EXPECT_EQ(s.item(1), range(200, 3));
  EXPECT_EQ(s.item(3), range(400, 8));
  EXPECT_EQ(s.item(4), range(500, 8));      // excess 1 -> 0
  EXPECT_EQ(s.item(5), range(600 + 2, 8));  // (1, 0, 5), excess 3 -> 2
}

TEST(Shorten, MaybeShortenFollowsTheSplitList) {
  auto base = items();
  const ShortenParams p{.method = ShortenMethod::Truncate, .split_list = "train", .length = 8};
  EXPECT_EQ(maybe_shorten(base, "valid", p), base);
  EXPECT_NE(maybe_shorten(base, "train", p), base);
  EXPECT_EQ(maybe_shorten(base, "train", ShortenParams{}), base);
}

}  // namespace
}  // namespace stretch::data
