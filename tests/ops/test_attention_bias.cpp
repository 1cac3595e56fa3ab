// tests/ops/test_attention_bias.cpp — the bias side of attention against values computed by
// hand or from the papers: ALiBi slopes (REFERENCE.md §1.1 test vectors), T5's buckets, the
// fork's "+m·j" form of ALiBi (REFERENCE.md §1.3), and parameter validation.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"

namespace stretch::ops {
namespace {

// REFERENCE.md §1.1 test-vector table. Powers of two are exact in float and compared with
// EXPECT_EQ; 2^-0.5 etc. are compared with float(2^-x) to 4 ulp (the fork rounds a double to
// float once) and with the 8 digits printed in the table to 4e-8 (5e-9 from printing plus half
// a float ulp, 3e-8, near 0.7).
TEST(AlibiSlopes, ReferenceTable) {
  auto pow2 = [](double e) { return static_cast<float>(std::exp2(e)); };
  EXPECT_EQ(alibi_slopes(1), (std::vector<float>{0.00390625f}));
  EXPECT_EQ(alibi_slopes(2), (std::vector<float>{pow2(-4), pow2(-8)}));
  EXPECT_EQ(alibi_slopes(4), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f}));
  EXPECT_EQ(alibi_slopes(6), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f}));
  const std::vector<float> eight{0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f};
  EXPECT_EQ(alibi_slopes(8), eight);

  const std::vector<float> twelve = alibi_slopes(12);
  ASSERT_EQ(twelve.size(), 12u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(twelve[i], eight[i]) << i;
  const double printed[4] = {0.70710678, 0.35355339, 0.17677670, 0.08838835};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(twelve[8 + i], printed[i], 4e-8) << i;
    EXPECT_FLOAT_EQ(twelve[8 + i], pow2(-0.5 - i)) << i;
  }

  const std::vector<float> sixteen = alibi_slopes(16);
  ASSERT_EQ(sixteen.size(), 16u);
  for (int k = 1; k <= 16; ++k) {
    EXPECT_FLOAT_EQ(sixteen[k - 1], pow2(-0.5 * k)) << k;
    if (k % 2 == 0) {
      EXPECT_EQ(sixteen[k - 1], pow2(-0.5 * k)) << k;  // exact powers of two
    }
  }
  EXPECT_NEAR(sixteen[0], 0.70710678, 4e-8);
  EXPECT_EQ(sixteen[1], 0.5f);
  EXPECT_NEAR(sixteen[2], 0.35355339, 4e-8);
}

TEST(AlibiSlopes, RejectsNonPositiveHeadCount) {
  EXPECT_THROW(alibi_slopes(0), Error);
  EXPECT_THROW(alibi_slopes(-3), Error);
}

// T5 unidirectional buckets (num_buckets 32, max_distance 128), n = max(−rel, 0), by hand:
//   max_exact = 16; n < 16 → n; otherwise 16 + floor(ln(n/16) / ln(128/16) · 16), ≤ 31.
//   rel = +5 (key after query): n = 0 → 0
//   n = 15 → 15;  n = 16: ln 1 = 0 → 16;  n = 18: ln 1.125 / ln 8 · 16 = 0.906 → 16
//   n = 19: ln 1.1875 = 0.17185, / 2.07944 = 0.08264, · 16 = 1.322 → 17
//   n = 20: ln 1.25 = 0.22314 → 1.717 → 17;   n = 32: ln 2 / ln 8 · 16 = 5.333 → 21
//   n = 64: 10.667 → 26;   n = 100: ln 6.25 = 1.83258 → 14.101 → 30
//   n = 127: ln 7.9375 = 2.07160 → 15.940 → 31;   n = 128: 16 → 32, clamped → 31;  n = 1000 → 31
TEST(T5Bucket, UnidirectionalHandValues) {
  const auto C = AttentionMask::Causal;
  const std::vector<std::pair<int64_t, int>> expect{{5, 0},    {0, 0},     {-1, 1},    {-15, 15},  {-16, 16},
                                                    {-18, 16}, {-19, 17},  {-20, 17},  {-32, 21},  {-64, 26},
                                                    {-100, 30}, {-127, 31}, {-128, 31}, {-1000, 31}};
  for (auto [rel, bucket] : expect) EXPECT_EQ(t5_bucket(rel, 32, 128, C), bucket) << "rel " << rel;
}

// T5 bidirectional buckets (32 → 16 per direction, max_exact 8, max_distance 128), by hand:
//   rel = −3 → 3;  rel = +3 (key after query): 16 + 3 = 19;  rel = −8: 8
//   rel = −20: ln 2.5 = 0.91629, / ln 16 = 2.77259 → 0.33048, · 8 = 2.644 → 8 + 2 = 10
//   rel = +127: ln 15.875 = 2.76479 → 0.99719 · 8 = 7.977 → 15, + 16 = 31
//   rel = +200: ln 25 / ln 16 · 8 = 9.288 → 17, clamped to 15, + 16 = 31
TEST(T5Bucket, BidirectionalHandValues) {
  const auto B = AttentionMask::Bidirectional;
  EXPECT_EQ(t5_bucket(0, 32, 128, B), 0);
  EXPECT_EQ(t5_bucket(-3, 32, 128, B), 3);
  EXPECT_EQ(t5_bucket(3, 32, 128, B), 19);
  EXPECT_EQ(t5_bucket(-8, 32, 128, B), 8);
  EXPECT_EQ(t5_bucket(-20, 32, 128, B), 10);
  EXPECT_EQ(t5_bucket(127, 32, 128, B), 31);
  EXPECT_EQ(t5_bucket(200, 32, 128, B), 31);
}

// REFERENCE.md §1.3: the fork adds +m·j to the causal mask; the paper subtracts m·(i − j).
// The softmax over j is the same. With v = identity (D = S) the op's output row i IS the
// probability row P_i, compared with the fork's probabilities computed here in double.
// Tolerance 1e-6: probabilities are ≤ 1 and fp32 scores carry ~1e-7 absolute error.
TEST(AttentionAlibi, ForkFormGivesSameProbabilities) {
  for (int64_t H : {6, 8}) {
    const int64_t T = 48, S = 48, D = 48;
    Rng rng(3);
    std::vector<float> q(H * T * D), k(H * S * D), v(H * S * D, 0.f);
    for (auto& x : q) x = rng.uniform(-1, 1);
    for (auto& x : k) x = rng.uniform(-1, 1);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < S; ++j) v[(h * S + j) * D + j] = 1.f;
    const std::vector<float> slopes = alibi_slopes(static_cast<int>(H));
    AttentionParams p{.b = 1, .h = H, .t = T, .s = S, .d = D, .bias = BiasPolicy::Alibi};
    p.alibi.slopes = slopes.data();
    std::vector<float> out(H * T * D), lse(H * T), out_r(H * T * D), lse_r(H * T);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p);
    ref::attention_forward(out_r.data(), lse_r.data(), q.data(), k.data(), v.data(), p);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(S, -INFINITY);
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {  // the fork's causal mask: −inf above the diagonal
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += double(q[(h * T + i) * D + d]) * double(k[(h * S + j) * D + d]);
          s[j] = scale * dot + double(slopes[h]) * double(j);  // + m·j
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        for (int64_t j = 0; j < S; ++j) {
          const double pf = j <= i ? std::exp(s[j] - mx) / sum : 0.0;
          ASSERT_NEAR(out[(h * T + i) * D + j], pf, 1e-6) << "fast H=" << H << " h=" << h << " i=" << i << " j=" << j;
          ASSERT_NEAR(out_r[(h * T + i) * D + j], pf, 1e-6) << "ref H=" << H << " h=" << h << " i=" << i;
        }
      }
  }
}

// Bad parameters: one Error naming the field.
TEST(AttentionParamsCheck, RejectsInconsistentParameters) {
  const std::vector<float> slopes = alibi_slopes(2), table(64, 0.f);
  const AttentionParams good{.b = 1, .h = 2, .t = 4, .s = 4, .d = 8};
  EXPECT_NO_THROW(attention_check(good));
  auto expect_error = [](AttentionParams p, const std::string& field) {
    try {
      attention_check(p);
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  AttentionParams p = good;
  p.s = 3;
  expect_error(p, "s ");
  p = good, p.d = 0;
  expect_error(p, "shape");
  p = good, p.window = -1;
  expect_error(p, "window");
  p = good, p.dropout.p = 1.f;
  expect_error(p, "dropout.p");
  p = good, p.bias = BiasPolicy::Alibi;
  expect_error(p, "alibi.slopes");
  p.alibi.slopes = slopes.data(), p.mask = AttentionMask::Bidirectional;
  expect_error(p, "AlibiSym");
  p.mask = AttentionMask::Causal, p.alibi.shape = AlibiShape::Clipped;
  expect_error(p, "alibi.cap");
  p.alibi.shape = AlibiShape::Linear, p.alibi.slope_scale = 0.f;
  expect_error(p, "alibi.slope_scale");
  p = good, p.bias = BiasPolicy::T5;
  expect_error(p, "t5.table");
  p.t5.table = table.data(), p.t5.max_distance = 16;
  expect_error(p, "t5.max_distance");
  p.t5.max_distance = 128, p.t5.num_buckets = 31, p.mask = AttentionMask::Bidirectional;
  expect_error(p, "t5.num_buckets");
  // The op itself checks too (no crash on bad input).
  std::vector<float> buf(256);
  p = good, p.s = 2;
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), p), Error);
}

}  // namespace
}  // namespace stretch::ops
