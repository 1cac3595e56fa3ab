// tests/ops/test_lse_blocks.cpp — ops::lse_accumulate, evaluation's log-sum-exp over logits that
// arrive a column block at a time: with blocks starting at multiples of kLseColumnAlign its
// value() must be bitwise cross_entropy_forward's lse (and the NLL formed from it bitwise the
// forward's losses), for any block width that is such a multiple, under 1 and 2 threads; and within
// float rounding of the float64 reference (ref::cross_entropy_forward, two passes in double).
// Rows whose max grows in a later block, rows with a block of −inf only, and a row of −inf only
// are among the cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "ops/cross_entropy.h"
#include "ops/op_test_registry.h"

namespace stretch::ops {
namespace {

struct Case {
  int64_t n, v;
};

// Logits [n, v] in [-8, 8] with rows the online softmax must rescale: row 0 peaks in its last
// column, row 1's first kLseColumnAlign columns are −inf, row 2 is −inf throughout (when n > 2).
std::vector<float> make_logits(const Case& c, uint64_t seed) {
  std::vector<float> x = testing::random_floats(c.n * c.v, seed, -8.f, 8.f);
  const float ninf = -std::numeric_limits<float>::infinity();
  x[(c.v - 1)] = 40.f;
  if (c.n > 1)
    for (int64_t j = 0; j < std::min<int64_t>(kLseColumnAlign, c.v); ++j) x[c.v + j] = ninf;
  if (c.n > 2)
    for (int64_t j = 0; j < c.v; ++j) x[2 * c.v + j] = ninf;
  return x;
}

// The running lse of x fed in blocks of `width` columns, copied out of the row-major matrix.
std::vector<RunningLse> by_blocks(const std::vector<float>& x, const Case& c, int64_t width) {
  std::vector<RunningLse> rows(static_cast<size_t>(c.n));
  for (int64_t c0 = 0; c0 < c.v; c0 += width) {
    const int64_t w = std::min(width, c.v - c0);
    std::vector<float> block(static_cast<size_t>(c.n * w));
    for (int64_t i = 0; i < c.n; ++i) std::memcpy(&block[i * w], &x[i * c.v + c0], w * sizeof(float));
    lse_accumulate(rows.data(), block.data(), c.n, w, w, c0);
  }
  return rows;
}

TEST(LseBlocks, AlignedBlocksGiveTheForwardsLseBitwise) {
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (Case c : {Case{3, 700}, Case{7, 5000}, Case{40, 33280}}) {
      const std::vector<float> x = make_logits(c, 91 + c.n);
      std::vector<int32_t> targets = testing::random_ids(c.n, static_cast<int32_t>(c.v), 92 + c.n);
      if (c.n > 2) targets[2] = 0;  // the −inf row: lse −inf, its NLL NaN (−inf − −inf) in both
      const CrossEntropyDims d{.n = c.n, .v = c.v, .ignore_index = -1000000, .reduction = Reduction::Sum};
      std::vector<float> lse(c.n), losses(c.n);
      cross_entropy_forward(losses.data(), lse.data(), x.data(), targets.data(), d);
      for (int64_t width : {kLseColumnAlign, 2 * kLseColumnAlign, 4096l}) {
        const std::vector<RunningLse> rows = by_blocks(x, c, width);
        for (int64_t i = 0; i < c.n; ++i) {
          const float got = static_cast<float>(rows[i].value());
          const float nll = static_cast<float>(rows[i].value() - static_cast<double>(x[i * c.v + targets[i]]));
          EXPECT_EQ(0, std::memcmp(&got, &lse[i], sizeof(float)))
              << "row " << i << " of " << c.n << "x" << c.v << ", blocks of " << width << ", threads " << threads
              << ": " << got << " vs " << lse[i];
          EXPECT_EQ(0, std::memcmp(&nll, &losses[i], sizeof(float))) << "row " << i << ": " << nll << " vs " << losses[i];
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST(LseBlocks, MatchesTheFloat64Reference) {
  const Case c{9, 3000};
  const std::vector<float> x = make_logits(c, 17);
  std::vector<int32_t> targets(c.n, 0);
  const CrossEntropyDims d{.n = c.n, .v = c.v, .ignore_index = -1000000, .reduction = Reduction::Sum};
  std::vector<float> lse(c.n);
  ref::cross_entropy_forward(nullptr, lse.data(), x.data(), targets.data(), d);
  const std::vector<RunningLse> rows = by_blocks(x, c, 1024);
  for (int64_t i = 0; i < c.n; ++i) {
    if (i == 2) {  // −inf throughout: lse −inf (the two-pass reference gives NaN there: exp(−inf − −inf))
      EXPECT_TRUE(std::isinf(rows[i].value()) && rows[i].value() < 0) << rows[i].value();
      continue;
    }
    EXPECT_NEAR(rows[i].value(), lse[i], 1e-5 * std::max(1.f, std::fabs(lse[i]))) << "row " << i;
  }
  EXPECT_NEAR(rows[0].value(), 40.0, 1e-5);  // the row that peaks in its last column
}

TEST(LseBlocks, RefusesABlockThatDoesNotStartOnTheChunks) {
  std::vector<RunningLse> rows(2);
  std::vector<float> block(2 * 100, 0.f);
  EXPECT_THROW(lse_accumulate(rows.data(), block.data(), 2, 100, 100, 100), Error);
  EXPECT_THROW(lse_accumulate(rows.data(), block.data(), 2, 100, 50, 0), Error);  // ld < width
  EXPECT_NO_THROW(lse_accumulate(rows.data(), block.data(), 2, 100, 100, kLseColumnAlign));
}

}  // namespace
}  // namespace stretch::ops
