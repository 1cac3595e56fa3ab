// tests/ops/test_attention_tile.cpp — the fused attention's register-blocked tile product and block
// transpose (ops/attention_tile.h), directly: tile_gemm against a double-precision product for
// every row count, both A layouts, zero and accumulate, column counts that take whole kNr blocks,
// the kLanes half block and the element tail; the half block bitwise the same sums as a full
// block (so band products that stop at a half block change no number); transpose_block exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "ops/attention_tile.h"

namespace stretch::ops::attn {
namespace {

template <Init I, ALayout L>
void check_product(int m, int n, int k) {
  Rng rng(static_cast<uint64_t>(m * 1000 + n * 10 + k));
  const int lda = L == ALayout::Rows ? k + 3 : m + 3, ldb = n + 5, ldc = n + 7;
  std::vector<float> a(static_cast<size_t>((L == ALayout::Rows ? m : k) * lda + 1)), b(static_cast<size_t>(k * ldb + 1)),
      c(static_cast<size_t>(m * ldc + 1));
  for (auto& x : a) x = rng.uniform(-1.f, 1.f);
  for (auto& x : b) x = rng.uniform(-1.f, 1.f);
  for (auto& x : c) x = rng.uniform(-1.f, 1.f);
  const std::vector<float> c0(c);
  tile_gemm<I, L>(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(r * ldc + j);
      if (j >= n) {
        ASSERT_EQ(c[at], c0[at]) << "wrote outside the product: m " << m << " n " << n << " k " << k;
        continue;
      }
      double want = I == Init::Accumulate ? c0[at] : 0.0, mag = std::fabs(want);
      for (int p = 0; p < k; ++p) {
        const double t = static_cast<double>(L == ALayout::Rows ? a[r * lda + p] : a[p * lda + r]) * b[p * ldb + j];
        want += t, mag += std::fabs(t);
      }
      ASSERT_NEAR(c[at], want, 1e-6 * (mag + 1.0)) << "m " << m << " n " << n << " k " << k << " (" << r << ", " << j
                                                    << ")";
    }
}

TEST(AttentionTile, ProductMatchesDoubleForEveryShapePath) {
  // n: whole kNr blocks, a kLanes half block, element tails, and combinations of the three.
  for (int m : {1, 2, 3, 5, 7, 8, 9, 13, 16})
    for (int n : {1, 7, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 71, 80, 96})
      for (int k : {0, 1, 7, 64}) {
        check_product<Init::Zero, ALayout::Rows>(m, n, k);
        check_product<Init::Accumulate, ALayout::Rows>(m, n, k);
        check_product<Init::Zero, ALayout::Cols>(m, n, k);
        check_product<Init::Accumulate, ALayout::Cols>(m, n, k);
      }
}

// Columns a half block computes are the bits a full block gives them: the same FMAs in the same
// order over p. (The relative-key band stops at a half block where it used to compute a whole one.)
TEST(AttentionTile, HalfBlockBitwiseAsFullBlock) {
  Rng rng(5);
  const int m = 16, k = 64, ld = 64;
  std::vector<float> a(m * k), b(k * ld), wide(m * ld), narrow(m * ld, 9.f);
  for (auto& x : a) x = rng.uniform(-1.f, 1.f);
  for (auto& x : b) x = rng.uniform(-1.f, 1.f);
  tile_gemm<Init::Zero, ALayout::Rows>(m, 2 * kNr, k, a.data(), k, b.data(), ld, wide.data(), ld);
  const int n = kNr + kLanes;  // one whole block and one half block
  tile_gemm<Init::Zero, ALayout::Rows>(m, n, k, a.data(), k, b.data(), ld, narrow.data(), ld);
  for (int r = 0; r < m; ++r) {
    ASSERT_EQ(std::memcmp(&wide[r * ld], &narrow[r * ld], sizeof(float) * n), 0) << "row " << r;
    for (int j = n; j < ld; ++j) ASSERT_EQ(narrow[r * ld + j], 9.f) << "row " << r << " wrote column " << j;
  }
}

TEST(AttentionTile, TransposeBlockExactWithZeroRows) {
  const int lds = kLanes + 3, ldd = kLanes + 5;
  std::vector<float> src(kLanes * lds), dst(kLanes * ldd);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
  for (int rows : {0, 1, kLanes / 2 + 1, kLanes}) {
    std::fill(dst.begin(), dst.end(), -7.f);
    transpose_block(dst.data(), ldd, src.data(), lds, rows);
    for (int x = 0; x < kLanes; ++x)
      for (int y = 0; y < ldd; ++y) {
        const float got = dst[x * ldd + y];
        if (y >= kLanes) ASSERT_EQ(got, -7.f) << "wrote past the block: x " << x << " y " << y;
        else ASSERT_EQ(got, y < rows ? src[y * lds + x] : 0.f) << "rows " << rows << " x " << x << " y " << y;
      }
  }
}

}  // namespace
}  // namespace stretch::ops::attn
