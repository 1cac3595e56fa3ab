// tests/ops/test_attention_tile_bf16.cpp — the bf16 path's operand conversions
// (ops/attention_tile_bf16.h) bit for bit against element loops written here: the transposed
// conversions (to_bf16_transposed: Qᵀ, dOᵀ; pack_transposed_pairs: Kᵀ, Vᵀ pair-packed), which are
// register transposes of 16 × 16 blocks, and the row conversions beside them (to_bf16_rows,
// pack_row_pairs). Shapes that leave partial blocks in every direction (odd lengths, fewer rows
// than a block, columns past the data), every padded element zero, nothing written past the
// destination, and the rounding of vcvtneps2bf16 (nearest even; denormal inputs ±0; NaN quiet).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "ops/attention_tile_bf16.h"

#if STRETCH_ATTN_BF16
namespace stretch::ops::attn {
namespace {

// fp32 → bf16 bits as vcvtneps2bf16 rounds (Intel SDM, "VCVTNEPS2BF16"): denormal inputs to
// signed zero, NaN kept with its quiet bit set, otherwise round to nearest, ties to even.
uint16_t bf16_oracle(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

bool bf16_instructions_here() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

constexpr uint16_t kCanary = 0xBEEF;

// x [rows, ldx] with values in (−2, 2), and a few specials among them: a denormal, ±inf, a NaN,
// a tie that rounds to even, and signed zero.
std::vector<float> input(int rows, int64_t ldx, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(rows * ldx + 1));
  for (auto& e : x) e = rng.uniform(-2.f, 2.f);
  const float specials[] = {std::numeric_limits<float>::denorm_min() * 3, -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            1.f + 1.f / 256.f /* a tie: 1 + 2^-8 rounds to 1 */, -0.f};
  for (size_t i = 0; i < std::size(specials) && i * 7 < x.size(); ++i) x[i * 7] = specials[i];
  return x;
}

TEST(AttentionTileBf16, TransposedRowsBitwiseWithZeroPadding) {
  if (!bf16_instructions_here()) GTEST_SKIP() << "no avx512_bf16 on this CPU";
  for (int rows : {1, 5, 16, 17, 64, 100})
    for (int cols : {1, 15, 16, 33, 64})
      for (int extra : {0, 3}) {
        const int64_t ldx = cols + 5, width = rows + extra, ldd = width + 2;
        const std::vector<float> x = input(rows, ldx, static_cast<uint64_t>(rows * 131 + cols));
        std::vector<uint16_t> dst(static_cast<size_t>(cols * ldd + 8), kCanary);
        to_bf16_transposed(dst.data(), ldd, x.data(), ldx, rows, cols, width);
        for (int c = 0; c < cols; ++c)
          for (int64_t r = 0; r < ldd; ++r) {
            const uint16_t got = dst[c * ldd + r];
            const uint16_t want = r < rows ? bf16_oracle(x[r * ldx + c]) : r < width ? 0 : kCanary;
            ASSERT_EQ(got, want) << "rows " << rows << " cols " << cols << " width " << width << " at (" << c << ", "
                                 << r << ")";
          }
        for (size_t i = static_cast<size_t>(cols * ldd); i < dst.size(); ++i) ASSERT_EQ(dst[i], kCanary);
      }
}

TEST(AttentionTileBf16, TransposedPairsBitwiseWithZeroPadding) {
  if (!bf16_instructions_here()) GTEST_SKIP() << "no avx512_bf16 on this CPU";
  for (int n : {1, 7, 16, 40, 64})
    for (int k : {1, 2, 31, 32, 33, 64, 65, 128})
      for (int64_t ldb : {int64_t{16}, int64_t{64}}) {
        if (n > ldb) continue;
        const int64_t ldx = k + 3;
        const int k2 = (k + 1) / 2;
        const std::vector<float> x = input(n, ldx, static_cast<uint64_t>(n * 1000 + k));
        std::vector<uint16_t> dst(static_cast<size_t>(k2 * ldb * 2 + 8), kCanary);
        pack_transposed_pairs(dst.data(), ldb, x.data(), ldx, n, k);
        for (int p = 0; p < k2; ++p)
          for (int64_t j = 0; j < ldb; ++j)
            for (int e = 0; e < 2; ++e) {
              const uint16_t got = dst[(p * ldb + j) * 2 + e];
              const bool in = j < n && 2 * p + e < k;
              const uint16_t want = in ? bf16_oracle(x[j * ldx + 2 * p + e]) : 0;
              ASSERT_EQ(got, want) << "n " << n << " k " << k << " ldb " << ldb << " pair " << p << " key " << j
                                   << " half " << e;
            }
        for (size_t i = static_cast<size_t>(k2 * ldb * 2); i < dst.size(); ++i) ASSERT_EQ(dst[i], kCanary);
      }
}

TEST(AttentionTileBf16, RowConversionsBitwise) {
  if (!bf16_instructions_here()) GTEST_SKIP() << "no avx512_bf16 on this CPU";
  for (int rows : {1, 6, 17})
    for (int cols : {1, 30, 64}) {
      const int64_t ldx = cols + 1, ldd = (cols + 15) / 16 * 16;
      const std::vector<float> x = input(rows, ldx, static_cast<uint64_t>(rows + 7 * cols));
      std::vector<uint16_t> r(static_cast<size_t>(rows * ldd), kCanary);
      to_bf16_rows(r.data(), ldd, x.data(), ldx, rows, cols);
      for (int i = 0; i < rows; ++i)
        for (int64_t c = 0; c < ldd; ++c)
          ASSERT_EQ(r[i * ldd + c], c < cols ? bf16_oracle(x[i * ldx + c]) : 0) << "to_bf16_rows (" << i << ", " << c << ")";
      // pack_row_pairs: x [rows = k, cols = n] → [ceil(k / 2), ldd, 2], B(2p + e, j) = x(2p + e, j).
      const int k2 = (rows + 1) / 2;
      std::vector<uint16_t> p(static_cast<size_t>(k2 * ldd * 2), kCanary);
      pack_row_pairs(p.data(), ldd, x.data(), ldx, rows, cols);
      for (int q = 0; q < k2; ++q)
        for (int64_t j = 0; j < ldd; ++j)
          for (int e = 0; e < 2; ++e) {
            const bool in = j < cols && 2 * q + e < rows;
            ASSERT_EQ(p[(q * ldd + j) * 2 + e], in ? bf16_oracle(x[(2 * q + e) * ldx + j]) : 0)
                << "pack_row_pairs rows " << rows << " cols " << cols << " (" << q << ", " << j << ", " << e << ")";
          }
    }
}

}  // namespace
}  // namespace stretch::ops::attn
#endif
