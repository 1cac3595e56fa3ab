// tests/ops/test_attention_tile_amx.cpp — the fused attention's bf16 tile product on the AMX tile
// unit (ops/attention_tile_amx.h) against sums computed here in double:
//  - small integers (exact in bf16 and in every fp32 partial sum), so the product must equal the
//    oracle bit for bit whichever unit computes which part: shapes with whole 2 × 2 tile blocks,
//    a lone row of tiles, row and column tails (tile_gemm_bf16's part) and sums of k2 not a
//    multiple of 16 pairs (all tile_gemm_bf16), with = and +=; C's columns past n untouched;
//  - random bf16 values of both signs, within fp32 rounding of the double sum;
//  - amx_tiles_usable() is true exactly where /proc/cpuinfo and Linux's grant say the tiles run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "cpu_flags.h"
#include "ops/attention_tile_amx.h"

namespace stretch::ops::attn {
namespace {

#if STRETCH_ATTN_AMX
uint16_t bf16_bits(float f) {  // exact for the values used here (integers, and values already bf16)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  int m, n, k2;
  std::vector<uint16_t> a, b;  // A [m, lda], B [k2, ldb, 2]
  std::vector<float> c;        // C [m, ldc]
  int64_t lda, ldb, ldc;
};

// Values: integers in [−lim, lim] (exact sums) or, with lim = 0, bf16 roundings of (−1, 1).
Case make_case(int m, int n, int k2, int lim, uint64_t seed) {
  Rng rng(seed);
  Case t{m, n, k2, {}, {}, {}, 2 * k2 + 6, (n + 31) / 32 * 32 + 32, n + 5};
  const auto draw = [&]() {
    if (lim > 0) return std::floor(rng.uniform(-lim, lim + 1.f));
    return from_bf16(bf16_bits(rng.uniform(-1.f, 1.f)));
  };
  t.a.resize(static_cast<size_t>(m * t.lda));
  for (auto& e : t.a) e = bf16_bits(draw());
  t.b.resize(static_cast<size_t>(k2 * t.ldb * 2));
  for (auto& e : t.b) e = bf16_bits(draw());
  t.c.resize(static_cast<size_t>(m * t.ldc));
  for (auto& e : t.c) e = lim > 0 ? draw() : rng.uniform(-1.f, 1.f);
  return t;
}

// C(i, j) (+)= Σ_p A(i, 2p + e)·B(2p + e, j) in double.
std::vector<double> oracle(const Case& t, bool accumulate) {
  std::vector<double> want(static_cast<size_t>(t.m * t.n));
  for (int i = 0; i < t.m; ++i)
    for (int j = 0; j < t.n; ++j) {
      double s = accumulate ? t.c[i * t.ldc + j] : 0.0;
      for (int p = 0; p < t.k2; ++p)
        for (int e = 0; e < 2; ++e)
          s += static_cast<double>(from_bf16(t.a[i * t.lda + 2 * p + e])) * from_bf16(t.b[(p * t.ldb + j) * 2 + e]);
      want[i * t.n + j] = s;
    }
  return want;
}

std::vector<float> run(const Case& t, bool accumulate) {
  std::vector<float> c = t.c;
  AmxTiles tiles(true);
  if (accumulate)
    tile_gemm_amx<Init::Accumulate>(t.m, t.n, t.k2, t.a.data(), t.lda, t.b.data(), t.ldb, c.data(), t.ldc);
  else
    tile_gemm_amx<Init::Zero>(t.m, t.n, t.k2, t.a.data(), t.lda, t.b.data(), t.ldb, c.data(), t.ldc);
  return c;
}

TEST(AttentionTileAmx, IntegerSumsBitwiseInEveryShape) {
  if (!amx_tiles_usable()) GTEST_SKIP() << "no AMX tiles granted on this CPU";
  for (int m : {1, 8, 15, 16, 17, 32, 40, 48, 64})
    for (int n : {1, 16, 31, 32, 33, 48, 64})
      for (int k2 : {8, 16, 17, 32, 64})
        for (bool acc : {false, true}) {
          const Case t = make_case(m, n, k2, 8, static_cast<uint64_t>(m * 10007 + n * 101 + k2));
          const std::vector<double> want = oracle(t, acc);
          const std::vector<float> got = run(t, acc);
          for (int i = 0; i < m; ++i)
            for (int64_t j = 0; j < t.ldc; ++j) {
              const float g = got[i * t.ldc + j];
              if (j < n)
                ASSERT_EQ(g, static_cast<float>(want[i * n + j]))
                    << "m " << m << " n " << n << " k2 " << k2 << (acc ? " +=" : " =") << " at (" << i << ", " << j << ")";
              else
                ASSERT_EQ(g, t.c[i * t.ldc + j]) << "column " << j << " past n " << n << " was written";
            }
        }
}

TEST(AttentionTileAmx, RandomBf16WithinFp32Rounding) {
  if (!amx_tiles_usable()) GTEST_SKIP() << "no AMX tiles granted on this CPU";
  for (int k2 : {16, 32, 64}) {
    const Case t = make_case(64, 64, k2, 0, static_cast<uint64_t>(k2));
    const std::vector<double> want = oracle(t, true);
    const std::vector<float> got = run(t, true);
    for (int i = 0; i < t.m; ++i)
      for (int j = 0; j < t.n; ++j) {
        double mag = std::fabs(t.c[i * t.ldc + j]);
        for (int p = 0; p < 2 * k2; ++p)
          mag += std::fabs(static_cast<double>(from_bf16(t.a[i * t.lda + p])) *
                           from_bf16(t.b[(p / 2 * t.ldb + j) * 2 + p % 2]));
        // 2k2 + 1 fp32 additions, each off by at most half an ulp of a partial sum ≤ mag.
        const double tol = (2 * k2 + 1) * std::ldexp(mag, -24);
        ASSERT_NEAR(got[i * t.ldc + j], want[i * t.n + j], tol) << "k2 " << k2 << " at (" << i << ", " << j << ")";
      }
  }
}
#endif

TEST(AttentionTileAmx, UsableExactlyWhereTheTilesAreGranted) {
#if STRETCH_ATTN_AMX
  EXPECT_EQ(amx_tiles_usable(), testing::amx_tiles_granted());
#else
  GTEST_SKIP() << "built without the bf16 attention kernel (no avx512_bf16 target): the AMX path is not compiled";
#endif
}

}  // namespace
}  // namespace stretch::ops::attn
