// ops::Bf16Products::Fp32Fma (ops/gemm.h): a Bf16 product as the fp32 product of the operands'
// bf16 values. Checked on every CPU (it needs no bf16 kernels): round_to_bf16_values against
// tensor/dtype.h's scalar float_to_bf16; every transpose, leading dimensions, alpha / beta, bias
// and ReLU against the double-accumulating reference on bf16-rounded inputs (gemm_reference under
// Bf16) at the fp32 tolerance, since bf16 × bf16 products are exact in fp32; the rounding really
// happens (far from the fp32 product); and, where oneDNN has bf16 matmul, the native product within
// the same tolerance. (Pre-rounded a16/b16 operands: Gemm.PreRoundedBf16OperandsGiveTheSameResult.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "ops/gemm.h"
#include "tensor/dtype.h"

namespace stretch::ops {
namespace {

struct ProductsScope {
  Bf16Products saved = bf16_products();
  explicit ProductsScope(Bf16Products p) { set_bf16_products(p); }
  ~ProductsScope() { set_bf16_products(saved); }
};

TEST(Bf16Fp32Fma, RoundToBf16ValuesIsTheScalarRoundingWidened) {
  Rng rng(11);
  const int64_t rows = 4, cols = 37, ld = 41;
  std::vector<float> src(rows * ld), dst(rows * cols, 99.f);
  for (auto& x : src) x = rng.uniform(-3, 3);
  src[1] = 1.0f + 1.0f / 256;            // a tie: to even (1.0)
  src[2] = 1.0f + 3.0f / 256;            // a tie: to even (1 + 4/256)
  src[3] = std::nanf("");
  src[4] = -INFINITY;
  src[5] = 3.4e38f;                      // rounds up to +inf, as float_to_bf16 does
  src[6] = 1e-40f;                       // subnormal
  round_to_bf16_values(dst.data(), src.data(), rows, cols, ld);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float want = bf16_to_float(float_to_bf16(src[r * ld + c])), got = dst[r * cols + c];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << r << "," << c;
      } else {
        EXPECT_EQ(got, want) << r << "," << c << " from " << src[r * ld + c];
      }
    }
  EXPECT_EQ(dst[1], 1.0f);
  EXPECT_EQ(dst[2], 1.0f + 4.0f / 256);
}

TEST(Bf16Fp32Fma, MatchesTheReferenceOnBf16RoundedInputs) {
  const ProductsScope scope(Bf16Products::Fp32Fma);
  Rng rng(12);
  for (int64_t m : {1, 9, 64}) for (int64_t n : {1, 17, 40}) for (int64_t k : {1, 130})
    for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes})
      for (int variant = 0; variant < 4; ++variant) {  // 0: alpha, beta = 1, wide ld; 1: bias; 2: bias + relu; 3: plain
        const int64_t pad = variant == 0 ? 3 : 0;
        const int64_t lda = (ta == Trans::Yes ? m : k) + pad, ldb = (tb == Trans::Yes ? k : n) + pad, ldc = n + pad;
        std::vector<float> a((ta == Trans::Yes ? k : m) * lda), b((tb == Trans::Yes ? n : k) * ldb), bias(n),
            c(m * ldc), r(m * ldc);
        for (auto& x : a) x = rng.uniform(-1, 1);
        for (auto& x : b) x = rng.uniform(-1, 1);
        for (auto& x : bias) x = rng.uniform(-1, 1);
        for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
        GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                     .alpha = variant == 0 ? 0.5f : 1.f, .beta = variant == 0 ? 1.f : 0.f,
                     .lda = pad ? lda : 0, .ldb = pad ? ldb : 0, .ldc = pad ? ldc : 0,
                     .bias = variant == 1 || variant == 2 ? bias.data() : nullptr,
                     .epilogue = variant == 2 ? GemmEpilogue::Relu : GemmEpilogue::None,
                     .precision = GemmPrecision::Bf16};
        gemm(p, a.data(), b.data(), c.data());
        gemm_reference(p, a.data(), b.data(), r.data());
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << " " << n << " " << k << " v" << variant;
      }
}

// It really rounds (K = 256: about sqrt(K)·2^-9 ≈ 0.03 from the fp32 product), and where oneDNN
// has bf16 matmul the native product agrees with it to fp32 rounding.
TEST(Bf16Fp32Fma, RoundsLikeTheNativeProduct) {
  Rng rng(14);
  const int64_t m = 16, n = 24, k = 256;
  std::vector<float> a(m * k), b(k * n), c32(m * n), fma(m * n), native(m * n);
  for (auto& x : a) x = rng.uniform(-1, 1);
  for (auto& x : b) x = rng.uniform(-1, 1);
  gemm({.m = m, .n = n, .k = k}, a.data(), b.data(), c32.data());
  {
    const ProductsScope scope(Bf16Products::Fp32Fma);
    gemm({.m = m, .n = n, .k = k, .precision = GemmPrecision::Bf16}, a.data(), b.data(), fma.data());
  }
  double from_fp32 = 0;
  for (size_t i = 0; i < c32.size(); ++i) from_fp32 = std::max(from_fp32, std::abs(static_cast<double>(c32[i]) - fma[i]));
  EXPECT_GT(from_fp32, 1e-3);
  EXPECT_LT(from_fp32, 0.2);
  if (!bf16_matmul_supported()) return;  // (the native half needs oneDNN's bf16 kernels)
  const ProductsScope scope(Bf16Products::Native);
  gemm({.m = m, .n = n, .k = k, .precision = GemmPrecision::Bf16}, a.data(), b.data(), native.data());
  for (size_t i = 0; i < fma.size(); ++i) ASSERT_NEAR(fma[i], native[i], 1e-4 * (1 + std::abs(native[i]))) << i;
}

}  // namespace
}  // namespace stretch::ops
