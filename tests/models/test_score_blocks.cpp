// The full-softmax head's target_nll projects a vocabulary wider than nn::kScoreBlockColumns a
// column block at a time (nn/chunked_nll.h): its NLL must be bitwise what the whole [m, V] logits
// chunk gives (chunked_target_nll without block logits), with and without the head's bias, for
// chunks of any size, in fp32 and in bf16 products, and within float rounding of a float64
// reference (on the bf16-rounded operands under bf16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bf16_support.h"
#include "nn/chunked_nll.h"
#include "nn/softmax_head.h"
#include "ops/gemm.h"

namespace stretch::nn {
namespace {

constexpr int64_t kV = 2 * kScoreBlockColumns + 808;  // two whole blocks and a short one
constexpr int64_t kC = 48, kRows = 37;

std::vector<float> uniform(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(g);
  return v;
}

std::vector<int32_t> ids(int64_t n, int32_t v, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int32_t> u(0, v - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& x : out) x = u(g);
  return out;
}

Tensor filled(std::vector<int64_t> shape, uint64_t seed, float scale) {
  Tensor t = Tensor::empty(Shape(shape));
  const std::vector<float> v = uniform(t.numel(), seed, -scale, scale);
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

// Every row once, odd ones descending, then even ones ascending.
std::vector<int64_t> scored_rows() {
  std::vector<int64_t> rows;
  for (int64_t r = kRows - 1; r >= 0; --r)
    if (r % 2) rows.push_back(r);
  for (int64_t r = 0; r < kRows; r += 2) rows.push_back(r);
  return rows;
}

struct Scored {
  std::vector<float> blocks, whole;
};

// target_nll of the head (column blocks) and chunked_target_nll over whole logits chunks, in
// chunks of `chunk_rows` rows, over rows in an order other than the hidden states'.
Scored score(const SoftmaxHead& head, const Tensor& hidden, int64_t chunk_rows) {
  const std::vector<int64_t> rows = scored_rows();
  std::vector<int32_t> targets = ids(kRows, static_cast<int32_t>(kV), 5);
  targets[0] = kV - 1;  // a target in the short last block
  targets[1] = 0;
  Scored s{std::vector<float>(rows.size()), std::vector<float>(rows.size())};
  head.target_nll(hidden, rows, targets, s.blocks.data(), chunk_rows);
  chunked_target_nll(hidden, rows, targets, s.whole.data(), chunk_rows, kV,
                     [&head](const Tensor& h) { return head.logits(autograd::Var(h)).value(); });
  return s;
}

void expect_bitwise(const Scored& s, const char* what) {
  ASSERT_EQ(s.blocks.size(), s.whole.size());
  for (size_t i = 0; i < s.blocks.size(); ++i)
    EXPECT_EQ(0, std::memcmp(&s.blocks[i], &s.whole[i], sizeof(float)))
        << what << ", row " << i << ": " << s.blocks[i] << " vs " << s.whole[i];
}

// nll = logsumexp(z) − z[target] in float64, z = hidden · weightᵀ (+ bias), the operands rounded
// to bf16 first under bf16 products.
std::vector<double> reference(const Tensor& hidden, const Tensor& weight, const Tensor* bias, bool bf16) {
  std::vector<float> h(hidden.f32(), hidden.f32() + hidden.numel()), w(weight.f32(), weight.f32() + weight.numel());
  if (bf16) {
    ops::round_to_bf16_values(h.data(), hidden.f32(), kRows, kC);
    ops::round_to_bf16_values(w.data(), weight.f32(), kV, kC);
  }
  const std::vector<int64_t> rows = scored_rows();
  std::vector<int32_t> targets = ids(kRows, static_cast<int32_t>(kV), 5);
  targets[0] = kV - 1, targets[1] = 0;
  std::vector<double> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<double> z(kV);
    double mx = -INFINITY, se = 0;
    for (int64_t v = 0; v < kV; ++v) {
      for (int64_t c = 0; c < kC; ++c) z[v] += static_cast<double>(h[rows[i] * kC + c]) * w[v * kC + c];
      if (bias) z[v] += bias->f32()[v];
      mx = std::max(mx, z[v]);
    }
    for (double x : z) se += std::exp(x - mx);
    out.push_back(mx + std::log(se) - z[targets[i]]);
  }
  return out;
}

// Both ways in `precision`, with and without bias, in one chunk and in chunks of 8 rows.
void check_blocks(ops::GemmPrecision precision) {
  const Tensor hidden = filled({kRows, kC}, 1, 1.f);
  const Tensor weight = filled({kV, kC}, 2, 0.5f), bias = filled({kV}, 3, 1.f);
  const bool bf16 = precision == ops::GemmPrecision::Bf16;
  for (const bool with_bias : {false, true}) {
    const SoftmaxHead head(autograd::Var(weight), with_bias ? autograd::Var(bias) : autograd::Var());
    const std::vector<double> ref = reference(hidden, weight, with_bias ? &bias : nullptr, bf16);
    for (const int64_t chunk_rows : {int64_t{0}, int64_t{8}}) {
      ops::set_matmul_precision(precision);
      const Scored s = score(head, hidden, chunk_rows);
      ops::set_matmul_precision(ops::GemmPrecision::Fp32);
      expect_bitwise(s, with_bias ? "with bias" : "without bias");
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_NEAR(s.blocks[i], ref[i], 1e-4 * std::max(1.0, std::fabs(ref[i])))
            << "row " << i << ", bias " << with_bias << ", bf16 " << bf16;
    }
  }
}

TEST(ScoreBlocks, ColumnBlocksGiveTheWholeChunksNllBitwise) { check_blocks(ops::GemmPrecision::Fp32); }

TEST(ScoreBlocks, Bf16ColumnBlocksGiveTheWholeChunksNllBitwise) {
  if (!ops::bf16_matmul_supported()) {
    testing::expect_bf16_refused([&] {
      ops::set_matmul_precision(ops::GemmPrecision::Bf16);
      try {
        score(SoftmaxHead{autograd::Var(filled({kV, kC}, 2, 0.5f))}, filled({kRows, kC}, 1, 1.f), 0);
      } catch (...) {
        ops::set_matmul_precision(ops::GemmPrecision::Fp32);
        throw;
      }
    });
    if (HasFailure()) return;
    GTEST_SKIP() << testing::bf16_skip_message();
  }
  check_blocks(ops::GemmPrecision::Bf16);
}

}  // namespace
}  // namespace stretch::nn
