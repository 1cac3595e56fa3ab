// ops/attention_tile_amx.h — internal to the fused kernel (attention_cpu*.cpp): the bf16 tile
// product of attention_tile_bf16.h on the AMX tile unit (tdpbf16ps), where the CPU has one and
// Linux grants it (issue 18: on such a CPU vdpbf16ps runs at half the fp32 FMA rate, the tiles at
// ~15x it).
//
// The operands are the ones tile_gemm_bf16 takes, unchanged: A bf16 row-major (a 16-row tile
// reads 16 rows of 16 pairs, stride lda), B pair-packed [k2, ldb, 2] (a tile reads 16 pair rows of
// 16 columns, stride ldb pairs: AMX's own B layout), C fp32 row-major.
//   tile_gemm_amx<Init>(m, n, k2, a, lda, b, ldb, c, ldc): C[m, n] (= or +=) A[m, 2·k2]·B[2·k2, n]
//     with tile_gemm_bf16's contract (only C's columns < n written). The tiles take rows [0, m16)
//     and columns [0, n32) (m16 = m rounded down to 16, n32 = n rounded down to 32, the 2 × 2
//     tile block's width); the rest, and every call whose k2 is not a multiple of 16 pairs, runs
//     tile_gemm_bf16. Callers pad where their operands allow (n and k2 rounded up over zeros).
//   AmxTiles: configures the eight tiles for the calling thread (palette 1, each 16 rows × 64
//     bytes: C 0-3, A 4-5, B 6-7) and releases them when it goes out of scope. Every
//     tile_gemm_amx call runs inside one; nothing else may use the tiles meanwhile on that thread
//     (oneDNN configures its own before each of its kernels).
// Rounding: each tdpbf16ps adds products of bf16 pairs to fp32 (the SDM: inputs' denormals read
// as zero, results' flushed, round to nearest even), so a sum can differ from vdpbf16ps's by the
// fp32 rounding of a different order; exact sums (the test's integers) are equal.
#pragma once
#include "ops/attention_tile_bf16.h"

#if STRETCH_ATTN_BF16 && defined(__x86_64__) && (!defined(__clang__) || __clang_major__ >= 16)
#define STRETCH_ATTN_AMX 1
#include "core/peak_flops.h"

#define STRETCH_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))

namespace stretch::ops::attn {

inline constexpr int kAmxRows = 16;   // rows of an A or C tile
inline constexpr int kAmxPairs = 16;  // bf16 pairs of one tile product's sum (A's row, B's rows)
inline constexpr int kAmxCols = 16;   // fp32 columns of a B or C tile

// Whether the tiles run here: core/peak_flops.h's rule (the CPU's amx_bf16 and amx_tile, a build
// with the tile intrinsics, Linux's grant), the one that decides where the AMX peak is measured.
inline bool amx_tiles_usable() {
  static const bool ok = cpu_has_usable_amx(cpu_info());
  return ok;
}

STRETCH_AMX_TARGET inline void amx_configure() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.bytes_per_row[t] = 64, cfg.rows[t] = kAmxRows;
  _tile_loadconfig(&cfg);
}
STRETCH_AMX_TARGET inline void amx_release() { _tile_release(); }

class AmxTiles {
 public:
  explicit AmxTiles(bool on) : on_(on) {
    if (on_) amx_configure();
  }
  ~AmxTiles() {
    if (on_) amx_release();
  }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;

 private:
  bool on_;
};

// C tiles (MB × 2 of 16 × 16; MB 1 or 2) at c += or = A rows · B columns, over k2 pairs (a
// multiple of 16).
template <Init I, int MB>
STRETCH_AMX_TARGET inline void amx_block(int k2, const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb,
                                         float* c, int64_t ldc) {
  const int64_t sa = lda * 2, sb = ldb * 4, sc = ldc * 4;  // bytes per row of A, of B (a pair row), of C
  float* c1 = c + kAmxRows * ldc;
  if constexpr (I == Init::Zero) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (MB == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else {
    _tile_loadd(0, c, sc);
    _tile_loadd(1, c + kAmxCols, sc);
    if constexpr (MB == 2) {
      _tile_loadd(2, c1, sc);
      _tile_loadd(3, c1 + kAmxCols, sc);
    }
  }
  for (int p = 0; p < k2; p += kAmxPairs) {
    _tile_loadd(4, a + 2 * p, sa);
    _tile_loadd(6, b + p * ldb * 2, sb);
    _tile_loadd(7, b + (p * ldb + kAmxCols) * 2, sb);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (MB == 2) {
      _tile_loadd(5, a + kAmxRows * lda + 2 * p, sa);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, sc);
  _tile_stored(1, c + kAmxCols, sc);
  if constexpr (MB == 2) {
    _tile_stored(2, c1, sc);
    _tile_stored(3, c1 + kAmxCols, sc);
  }
}

template <Init I>
STRETCH_AMX_TARGET inline void tile_gemm_amx(int m, int n, int k2, const uint16_t* a, int64_t lda, const uint16_t* b,
                                             int64_t ldb, float* c, int64_t ldc) {
  if (k2 % kAmxPairs != 0) return tile_gemm_bf16<I>(m, n, k2, a, lda, b, ldb, c, ldc);
  asm volatile("" ::: "memory");  // GCC's tileloadd asm does not say that it reads memory
  const int m16 = m / kAmxRows * kAmxRows, n32 = n / (2 * kAmxCols) * (2 * kAmxCols);
  for (int j = 0; j < n32; j += 2 * kAmxCols) {
    int i = 0;
    for (; i + 2 * kAmxRows <= m16; i += 2 * kAmxRows)
      amx_block<I, 2>(k2, a + i * lda, lda, b + j * 2, ldb, c + i * ldc + j, ldc);
    if (i < m16) amx_block<I, 1>(k2, a + i * lda, lda, b + j * 2, ldb, c + i * ldc + j, ldc);
  }
  // The column tail of the tiles' rows (tile_gemm_bf16 reads B's columns to n32 + 32 ≤ ldb), then
  // the rows past them.
  if (n32 < n && m16 > 0) tile_gemm_bf16<I>(m16, n - n32, k2, a, lda, b + n32 * 2, ldb, c + n32, ldc);
  if (m16 < m) tile_gemm_bf16<I>(m - m16, n, k2, a + m16 * lda, lda, b, ldb, c + m16 * ldc, ldc);
}

}  // namespace stretch::ops::attn
#endif
