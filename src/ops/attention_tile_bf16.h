// ops/attention_tile_bf16.h — internal to the fused kernel (attention_cpu*.cpp): the bf16 tile product of the fused
// attention kernel's bf16 path (vdpbf16ps: products of bf16 pairs summed in fp32) and the
// conversions that make its operands. Compiled only where the target has avx512_bf16
// (STRETCH_ATTN_BF16); elsewhere the kernel runs fp32 (attention_bf16_supported() is false).
//   tile_gemm_bf16<Init>(m, n, k2, a, lda, b, ldb, c, ldc):
//     C[m, n] (= or +=) A[m, 2·k2] · B[2·k2, n]; C fp32 row-major (ldc floats), only its
//     columns < n read and written (masked);
//     A bf16 row-major (lda elements, even): A(r, 2p) and A(r, 2p + 1) adjacent;
//     B bf16 pair-packed [k2, ldb, 2]: B(2p + e, j) at b[(p·ldb + j)·2 + e], ldb ≥ n rounded up
//     to kNr (columns ≥ n read, so they must be finite; the packers write zeros there).
// Rounding: every conversion is vcvtneps2bf16's (round to nearest even; denormal inputs become
// ±0, which no operand of the kernel reaches: probabilities are flushed below e^−60 first).
// Odd lengths are padded with zero pairs by the packers, so k2 = ceil(k / 2).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define STRETCH_ATTN_BF16 1
#include <immintrin.h>

#include "ops/attention_tile.h"

namespace stretch::ops::attn {

inline __mmask16 lanes_below(int n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? 0 : __mmask16((1u << n) - 1); }

template <int MR, Init I>
inline void micro_bf16(int k2, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float* c, int64_t ldc,
                       __mmask16 m0, __mmask16 m1) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    if constexpr (I == Init::Zero) {
      acc[r][0] = _mm512_setzero_ps();
      acc[r][1] = _mm512_setzero_ps();
    } else {
      acc[r][0] = _mm512_maskz_loadu_ps(m0, c + r * ldc);
      acc[r][1] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
    }
  }
  for (int p = 0; p < k2; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * ldb * 2);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * ldb * 2 + 32);
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * p, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc[r][1]);
  }
}

template <int MR, Init I>
inline void row_block_bf16(int n, int k2, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float* c,
                           int64_t ldc) {
  for (int j = 0; j < n; j += kNr)
    micro_bf16<MR, I>(k2, a, lda, b + j * 2, ldb, c + j, ldc, lanes_below(n - j), lanes_below(n - j - 16));
}

template <Init I>
inline void tile_gemm_bf16(int m, int n, int k2, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb,
                           float* c, int64_t ldc) {
  for (int i = 0; i < m; i += 8) {
    const uint16_t* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (m - i < 8 ? m - i : 8) {
      case 1: row_block_bf16<1, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 2: row_block_bf16<2, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 3: row_block_bf16<3, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 4: row_block_bf16<4, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 5: row_block_bf16<5, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 6: row_block_bf16<6, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      case 7: row_block_bf16<7, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
      default: row_block_bf16<8, I>(n, k2, ai, lda, b, ldb, ci, ldc); break;
    }
  }
}

// dst [rows, ldd] bf16 ← x [rows, cols] (row stride ldx); columns [cols, ldd) zero (the A side).
inline void to_bf16_rows(uint16_t* dst, int64_t ldd, const float* x, int64_t ldx, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < ldd; j += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(lanes_below(cols - j), x + r * ldx + j);
      _mm256_mask_storeu_epi16(dst + r * ldd + j, lanes_below(static_cast<int>(ldd) - j),
                               (__m256i)_mm512_cvtneps_pbh(v));
    }
}

// dst [cols, ldd] bf16 ← xᵀ for x [rows, cols] (row stride ldx): dst(c, r) = x(r, c); columns
// [rows, width) zero (the A side of a product that sums over x's rows; width ≤ ldd).
// By 16 × 16 blocks: 16 rows loaded (columns ≥ cols as zeros), transposed in registers, each
// column converted at once (an element loop was ~4% of a T 128 bf16 training attention).
inline void to_bf16_transposed(uint16_t* dst, int64_t ldd, const float* x, int64_t ldx, int rows, int cols,
                               int64_t width) {
  static_assert(kLanes == 16, "the bf16 path is AVX-512 only");
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 rm = lanes_below(rows - r0);
    for (int c0 = 0; c0 < cols; c0 += 16) {
      const __mmask16 cm = lanes_below(cols - c0);
      VecF v[16];
      for (int y = 0; y < 16; ++y)
        v[y] = y < rows - r0 ? (VecF)_mm512_maskz_loadu_ps(cm, x + (r0 + y) * ldx + c0) : VecF{};
      transpose_regs(v);
      for (int c = 0; c < 16 && c0 + c < cols; ++c)
        _mm256_mask_storeu_epi16(dst + (c0 + c) * ldd + r0, rm, (__m256i)_mm512_cvtneps_pbh((__m512)v[c]));
    }
  }
  for (int cc = 0; cc < cols; ++cc) std::fill(dst + cc * ldd + rows, dst + cc * ldd + width, uint16_t{0});
}

// dst [ceil(k / 2), ldb, 2] ← x [k, n] (row stride ldx), the pair-packed B of x; rows ≥ k and
// columns [n, ldb) zero (ldb a multiple of 16).
inline void pack_row_pairs(uint16_t* dst, int64_t ldb, const float* x, int64_t ldx, int k, int n) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int p = 0; 2 * p < k; ++p) {
    const float* r0 = x + 2 * p * ldx;
    const float* r1 = r0 + ldx;
    const bool has1 = 2 * p + 1 < k;
    for (int j = 0; j < ldb; j += 16) {
      const __mmask16 m = lanes_below(n - j);
      const __m512 v0 = _mm512_maskz_loadu_ps(m, r0 + j);
      const __m512 v1 = has1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);  // [v0 (16), v1 (16)]
      _mm512_storeu_si512(dst + (p * ldb + j) * 2, _mm512_permutexvar_epi16(interleave, both));
    }
  }
}

// dst [ceil(k / 2), ldb, 2] ← the pair-packed B of xᵀ for x [n, k] (row stride ldx):
// B(2p + e, j) = x(j, 2p + e); pairs past k and columns [n, ldb) zero (ldb a multiple of 16).
// A pair is one 32-bit word, so this is a transpose of 32-bit words: 16 rows of x converted to 16
// pairs each (columns ≥ k as zeros), the 16 × 16 words transposed in registers, 16 columns of B
// stored per pair row (an element loop was ~13% of a T 128 bf16 training attention).
inline void pack_transposed_pairs(uint16_t* dst, int64_t ldb, const float* x, int64_t ldx, int n, int k) {
  typedef uint32_t VecW __attribute__((vector_size(64)));
  const int k2 = (k + 1) / 2;
  for (int p0 = 0; p0 < k2; p0 += 16) {
    const __mmask16 lo = lanes_below(k - 2 * p0), hi = lanes_below(k - 2 * p0 - 16);
    for (int64_t j0 = 0; j0 < ldb; j0 += 16) {
      VecW w[16];
      for (int y = 0; y < 16; ++y) {
        if (j0 + y >= n) {
          w[y] = VecW{};
          continue;
        }
        const float* row = x + (j0 + y) * ldx + 2 * p0;
        const __m512 a = _mm512_maskz_loadu_ps(lo, row), b = _mm512_maskz_loadu_ps(hi, row + 16);
        w[y] = (VecW)_mm512_cvtne2ps_pbh(b, a);  // word q = (x(j, 2(p0 + q)), x(j, 2(p0 + q) + 1))
      }
      transpose_regs(w);
      for (int q = 0; q < 16 && p0 + q < k2; ++q) _mm512_storeu_si512(dst + ((p0 + q) * ldb + j0) * 2, (__m512i)w[q]);
    }
  }
}

}  // namespace stretch::ops::attn
#endif
