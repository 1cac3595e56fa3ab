#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "ops/gemm.h"

namespace stretch::ops {

// fp32 GEMM vs a double-accumulating reference: relative error bound grows like K·eps;
// 1e-4 relative to the row's magnitude covers K up to ~1000 with margin (eps = 6e-8).
TEST(Gemm, MatchesReferenceAllTransposes) {
  Rng rng(1);
  for (int64_t m : {1, 7, 64}) for (int64_t n : {1, 5, 33}) for (int64_t k : {1, 3, 130}) {
    for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes}) {
      std::vector<float> a(m * k), b(k * n), c(m * n), r(m * n);
      for (auto& x : a) x = rng.uniform(-1, 1);
      for (auto& x : b) x = rng.uniform(-1, 1);
      for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
      GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 0.5f, .beta = 1.0f};
      gemm(p, a.data(), b.data(), c.data());
      gemm_reference(p, a.data(), b.data(), r.data());
      for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << n << k;
    }
  }
}

// Bias, ReLU epilogue and bf16 inputs (the matmul-primitive route) against the same reference.
// Under Bf16 both sides round the inputs to bf16 identically (round to nearest even) and a
// product of two bf16 values is exact in fp32, so only the fp32 summation differs: the fp32
// tolerance above applies unchanged.
TEST(Gemm, BiasReluBf16MatchReference) {
  Rng rng(2);
  for (GemmPrecision prec : {GemmPrecision::Fp32, GemmPrecision::Bf16})
    for (int64_t m : {1, 9, 64}) for (int64_t n : {1, 17, 40}) for (int64_t k : {1, 130})
      for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes})
        for (int variant = 0; variant < 3; ++variant) {  // 0: beta = 1; 1: bias; 2: bias + relu
          std::vector<float> a(m * k), b(k * n), bias(n), c(m * n), r(m * n);
          for (auto& x : a) x = rng.uniform(-1, 1);
          for (auto& x : b) x = rng.uniform(-1, 1);
          for (auto& x : bias) x = rng.uniform(-1, 1);
          for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
          GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .beta = variant == 0 ? 1.f : 0.f,
                       .bias = variant > 0 ? bias.data() : nullptr,
                       .epilogue = variant == 2 ? GemmEpilogue::Relu : GemmEpilogue::None, .precision = prec};
          gemm(p, a.data(), b.data(), c.data());
          gemm_reference(p, a.data(), b.data(), r.data());
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << " " << n << " " << k << " v" << variant;
          if (variant == 2) {
            for (float x : c) ASSERT_GE(x, 0.f);
          }
        }
}

// Bf16 must really round: on random inputs with K = 256 the bf16 product differs from the fp32 one
// by about sqrt(K)·2^-9·|a||b| ≈ 0.03 (bf16 keeps 8 mantissa bits), far above fp32 rounding.
TEST(Gemm, Bf16DiffersFromFp32ByBf16Rounding) {
  Rng rng(3);
  const int64_t m = 16, n = 16, k = 256;
  std::vector<float> a(m * k), b(k * n), c32(m * n), c16(m * n);
  for (auto& x : a) x = rng.uniform(-1, 1);
  for (auto& x : b) x = rng.uniform(-1, 1);
  gemm({.m = m, .n = n, .k = k}, a.data(), b.data(), c32.data());
  gemm({.m = m, .n = n, .k = k, .precision = GemmPrecision::Bf16}, a.data(), b.data(), c16.data());
  double worst = 0;
  for (size_t i = 0; i < c32.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(c32[i]) - c16[i]));
  EXPECT_GT(worst, 1e-3);
  EXPECT_LT(worst, 0.2);
}

}  // namespace stretch::ops
