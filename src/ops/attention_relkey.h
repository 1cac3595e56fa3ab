// ops/attention_relkey.h — internal to the fused kernel (attention_cpu*.cpp): the relative-key term
// scale·[u·k_j + (q_i + w)·R[row(p_i − j)]] of ops/attention.h, evaluated per (query tile, key tile)
// as a band GEMM, never as a [T, S] matrix and never through a materialised rel-shift.
//
// For query rows at positions p0 .. p0+mq−1 and the nspan keys j_end − nspan .. j_end − 1 of all
// the key tiles they visit, the distances p − j form a band of mq + nspan − 1 values starting at
// dist_lo = p0 − j_end + 1 (≥ −126: a visited tile holds a visible key). tile_gemm computes
//   band[r, x] = (q_r + w)·R[dist_lo + x]           [mq, mq + nspan − 1]
// once per query tile from a transposed copy of R laid out by distance, in row blocks of kRelSub
// rows that each compute only the columns their rows use, and row r's score for key j reads
// band[r, r + j_end − 1 − j] (a reversed contiguous run per key tile). The backward visits a
// query tile's key tiles in turn, scatters scale·dS the same way into a band G and then gets
// dQ += G·R_band, dR_band += Gᵀ·(Q + w), dw += Σ_x colsum(G)_x R[x]; du += Σ_j colsum(dS)_j k_j.
// R is copied once per call into the distance-major packs below with clamp and strides resolved:
// column c of a pack holds distance c − kRelPad (zero for negative distances and for distances
// outside R's rows, which no visible key has), so the band of every visited tile is in range.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_tile.h"
#include "ops/cpu_util.h"

namespace stretch::ops::attn {

inline constexpr int kRelPad = 128;  // pack columns before distance 0 (a band reaches −126)

struct RelKeySetup {
  bool on = false;
  bool has_u = false, has_w = false;
  bool learn_r = false, learn_u = false, learn_w = false;
  int64_t hr = 0;                 // heads with their own R: H (PerHead) or 1 (Shared)
  int64_t d = 0;                  // D
  const float* u = nullptr;       // [H, D] or null
  const float* w = nullptr;       // [H, D] or null
  int64_t ncols = 0;              // kRelPad + S + kNr (the last kNr: zero, read by padded bands)
  cpu::Scratch rt;                // [hr, D, ncols] R transposed (forward band GEMM's B operand)
  cpu::Scratch rrow;              // [hr, ncols, D] R by rows (backward: dQ += G·R_band)
  const float* rt_head(int64_t h) const { return rt.data() + (hr == 1 ? 0 : h) * d * ncols; }
  const float* rrow_head(int64_t h) const { return rrow.data() + (hr == 1 ? 0 : h) * ncols * d; }
  bool learn() const { return learn_r || learn_u || learn_w; }
};

// Packs R for p (already checked); `backward` also builds rrow and records which gradients are asked.
RelKeySetup relkey_setup(const AttentionParams& p, const AttentionGrads* g);

// Row blocks of the band products: rows r0 .. r0+m−1 of a tile only meet band columns
// r0 .. r0+m+nspan−2, so each block computes its own [m, m + nspan − 1] slice (two micro-kernel
// row blocks tall), rounded up to whole vectors.
inline constexpr int kRelSub = 2 * kMr;

// The row stride of a band buffer for up to `rows` query rows and keys spanning nspan_max
// columns (≥ rows + nspan_max + kLanes − 2, the most relkey_band writes, in whole vectors).
inline int64_t band_ld(int64_t rows, int64_t nspan_max) {
  return (rows + nspan_max + 2 * kLanes - 1) / kLanes * kLanes;
}

// band [mq, ld] ← (Q + w)·R_bandᵀ for query rows at positions p0 .. p0+mq−1 and the keys
// j_end − nspan .. j_end − 1: dist_lo = p0 − j_end + 1, row r's entries r .. r + nspan − 1 (key
// j at column r + j_end − 1 − j) are written; the rest of the row is not. One call per query tile
// over all its key tiles (nspan = their keys): deep products, and each distance computed once
// per row block instead of once per key tile.
inline void relkey_band(const RelKeySetup& rs, int64_t h, int mq, int64_t nspan, const float* qr, int64_t ldqr,
                        int64_t dist_lo, float* band, int64_t ld) {
  const float* rt = rs.rt_head(h) + kRelPad + dist_lo;
  for (int r0 = 0; r0 < mq; r0 += kRelSub) {
    const int m = mq - r0 < kRelSub ? mq - r0 : kRelSub;
    // Whole vectors (tile_gemm's kNr blocks, then a kLanes block): the element tail is several
    // times slower per column.
    const int nb = static_cast<int>((m + nspan - 1 + kLanes - 1) / kLanes * kLanes);
    tile_gemm<Init::Zero, ALayout::Rows>(m, nb, static_cast<int>(rs.d), qr + r0 * ldqr, ldqr, rt + r0, rs.ncols,
                                         band + r0 * ld + r0, ld);
  }
}

// Backward of relkey_band from G [mq, ld] (row r: scale·dS in columns r .. r + nspan − 1, zero in
// the rest of 0 .. mq + nspan − 2 rounded up to whole vectors): dQ [mq, D] (row stride ldq) +=
// G·R_band by row blocks; dR [.., D] (rows from the band's first distance) += Gᵀ·(Q + w) in one
// product over all mq rows (a product over a row block would be 16 deep; the whole tile multiplies
// (mq − 1) zeros per column, little beside nspan), from Gᵀ transposed into gt [.., kq] first
// (kq ≥ mq rounded up to kLanes; gt holds ld rows): read down G's columns, kq rows apart, the
// product took ~1.4× a tile product's time. The same products in the same order either way.
inline void relkey_band_backward(const RelKeySetup& rs, int64_t h, int mq, int64_t nspan, const float* g,
                                 int64_t ld, const float* qr, int64_t ldqr, int64_t dist_lo, float* dq, int64_t ldq,
                                 float* dr, float* gt, int kq) {
  const int64_t D = rs.d;
  const float* rrow = rs.rrow_head(h) + (kRelPad + dist_lo) * D;
  for (int r0 = 0; r0 < mq; r0 += kRelSub) {
    const int m = mq - r0 < kRelSub ? mq - r0 : kRelSub;
    tile_gemm<Init::Accumulate, ALayout::Rows>(m, static_cast<int>(D), static_cast<int>(m + nspan - 1),
                                               g + r0 * ld + r0, ld, rrow + r0 * D, D, dq + r0 * ldq, ldq);
  }
  if (dr == nullptr) return;
  const int width = static_cast<int>(mq + nspan - 1);
  for (int c = 0; c < width; c += kLanes)
    for (int r0 = 0; r0 < mq; r0 += kLanes)
      transpose_block(gt + c * kq + r0, kq, g + r0 * ld + c, ld, mq - r0 < kLanes ? mq - r0 : kLanes);
  tile_gemm<Init::Accumulate, ALayout::Rows>(width, static_cast<int>(D), mq, gt, kq, qr, ldqr, dr, D);
}

// s[jj] += band row r's entry for key j0 + jj, where j_end − j0 = after (column r + after − 1 − jj).
inline void relkey_add_row(float* s, int nk, const float* band_row, int r, int64_t after) {
  const float* b = band_row + r + after - 1;
  for (int jj = 0; jj < nk; ++jj) s[jj] += b[-jj];
}

// g_row[r + after − 1 − jj] = ds[jj] (key j0 + jj, j_end − j0 = after; the caller zeroes the
// rest of the row).
inline void relkey_scatter_row(float* g_row, const float* ds, int nk, int r, int64_t after) {
  float* g = g_row + r + after - 1;
  for (int jj = 0; jj < nk; ++jj) g[-jj] = ds[jj];
}

// Per-(b, h) gradient partials, reduced over b (and heads, when shared) in fixed order at the end.
struct RelKeyPartials {
  cpu::Scratch dr;              // [B·H, ncols, D] dR by distance column (learn_r); each (b, h)'s
                                // block zeroed by its backward task
  std::vector<double> du;       // [B·H, D]
  std::vector<double> dw;       // [B·H, D]
};
RelKeyPartials relkey_partials(const RelKeySetup& rs, int64_t bh_count);
// extra.drel_r / drel_u / drel_w += the partials (clamped distances folded onto their row of R).
void relkey_scatter_grad(const RelKeySetup& rs, const AttentionParams& p, const RelKeyPartials& part,
                         const AttentionGrads& extra);

}  // namespace stretch::ops::attn
