// ops/attention_relkey.h — internal to attention_cpu.cpp: the relative-key term
// scale·[u·k_j + (q_i + w)·R[row(p_i − j)]] of ops/attention.h, evaluated per (query tile, key tile)
// as a band GEMM, never as a [T, S] matrix and never through a materialised rel-shift.
//
// For query rows at positions p0 .. p0+mq−1 and keys j0 .. j0+kBk−1 the distances p − j form a band
// of mq + kBk − 1 ≤ 127 values starting at dist_lo = p0 − j0 − (kBk − 1). tile_gemm computes
//   band[r, x] = (q_r + w)·R[dist_lo + x]           [mq, mq + kBk − 1]
// from a transposed copy of R laid out by distance, in row blocks of kRelSub rows that each
// compute only the columns their rows use, and row r's score for key jj reads
// band[r, r + kBk − 1 − jj] (a reversed contiguous run). The backward scatters scale·dS the same way
// into a band G and gets dQ += G·R_band, dR_band += Gᵀ·(Q + w), dw += Σ_x colsum(G)_x R[x], and
// du += Σ_j colsum(dS)_j k_j.
// R is copied once per call into the distance-major packs below with clamp and strides resolved:
// column c of a pack holds distance c − kRelPad (zero for negative distances and for distances
// outside R's rows, which no visible key has), so the band of every visited tile is in range.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_tile.h"

namespace stretch::ops::attn {

inline constexpr int kRelPad = 128;  // pack columns before distance 0 (a band reaches −126)
inline constexpr int kBandLd = 144;  // row stride of band buffers (≥ kBq + kBk − 1 + kNr − 1)

struct RelKeySetup {
  bool on = false;
  bool has_u = false, has_w = false;
  bool learn_r = false, learn_u = false, learn_w = false;
  int64_t hr = 0;                 // heads with their own R: H (PerHead) or 1 (Shared)
  int64_t d = 0;                  // D
  const float* u = nullptr;       // [H, D] or null
  const float* w = nullptr;       // [H, D] or null
  int64_t ncols = 0;              // kRelPad + S + kNr (the last kNr: zero, read by padded bands)
  std::vector<float> rt;          // [hr, D, ncols] R transposed (forward band GEMM's B operand)
  std::vector<float> rrow;        // [hr, ncols, D] R by rows (backward: dQ += G·R_band); learn only
  const float* rt_head(int64_t h) const { return rt.data() + (hr == 1 ? 0 : h) * d * ncols; }
  const float* rrow_head(int64_t h) const { return rrow.data() + (hr == 1 ? 0 : h) * ncols * d; }
  bool learn() const { return learn_r || learn_u || learn_w; }
};

// Packs R for p (already checked); `backward` also builds rrow and records which gradients are asked.
RelKeySetup relkey_setup(const AttentionParams& p, const AttentionGrads* g);

// Row blocks of the band products: rows r0 .. r0+m−1 of a tile only meet band columns
// r0 .. r0+m+kBk−2, so each block computes its own [m, m + kBk − 1] slice (two micro-kernel row
// blocks tall), rounded up to whole vectors (16 × 80): 0.625 of the flops of one [64, 128] product,
// the same entries where they are used.
inline constexpr int kRelSub = 2 * kMr;

// band [mq, kBandLd] ← (Q + w)·R_bandᵀ for the tile whose band starts at distance dist_lo (row r's
// entries r .. r + nk_full − 1 are written; the rest of the row is not).
inline void relkey_band(const RelKeySetup& rs, int64_t h, int mq, int nk_full, const float* qr, int64_t ldqr,
                        int64_t dist_lo, float* band) {
  const float* rt = rs.rt_head(h) + kRelPad + dist_lo;
  for (int r0 = 0; r0 < mq; r0 += kRelSub) {
    const int m = mq - r0 < kRelSub ? mq - r0 : kRelSub;
    // Whole vectors (tile_gemm's kNr blocks, then a kLanes block): the element tail is several
    // times slower per column. m = 16 rows need 79 columns: 80, where whole kNr blocks took 96.
    const int nb = (m + nk_full - 1 + kLanes - 1) / kLanes * kLanes;
    tile_gemm<Init::Zero, ALayout::Rows>(m, nb, static_cast<int>(rs.d), qr + r0 * ldqr, ldqr, rt + r0, rs.ncols,
                                         band + r0 * kBandLd + r0, kBandLd);
  }
}

// Backward of the band for one tile from G [mq, kBandLd] (row r nonzero only in r .. r + nk_full − 1):
// dQ [mq, D] (row stride ldq) += G·R_band; dR [.., D] (rows from the band's first distance) += Gᵀ·(Q + w).
inline void relkey_band_backward(const RelKeySetup& rs, int64_t h, int mq, int nk_full, const float* g,
                                 const float* qr, int64_t ldqr, int64_t dist_lo, float* dq, int64_t ldq, float* dr) {
  const int64_t D = rs.d;
  const float* rrow = rs.rrow_head(h) + (kRelPad + dist_lo) * D;
  for (int r0 = 0; r0 < mq; r0 += kRelSub) {
    const int m = mq - r0 < kRelSub ? mq - r0 : kRelSub;
    const int nb = m + nk_full - 1;
    const float* gb = g + r0 * kBandLd + r0;
    tile_gemm<Init::Accumulate, ALayout::Rows>(m, static_cast<int>(D), nb, gb, kBandLd, rrow + r0 * D, D,
                                               dq + r0 * ldq, ldq);
    if (dr != nullptr)
      tile_gemm<Init::Accumulate, ALayout::Cols>(nb, static_cast<int>(D), m, gb, kBandLd, qr + r0 * ldqr, ldqr,
                                                 dr + r0 * D, D);
  }
}

// s[jj] += band row r's entry for key jj (distance dist_lo + r + nk_full − 1 − jj).
inline void relkey_add_row(float* s, int nk, const float* band_row, int r, int nk_full) {
  const float* b = band_row + r + nk_full - 1;
  for (int jj = 0; jj < nk; ++jj) s[jj] += b[-jj];
}

// g_row[r + nk_full − 1 − jj] = ds[jj] (g_row zeroed by the caller over the row's band).
inline void relkey_scatter_row(float* g_row, const float* ds, int nk, int r, int nk_full) {
  float* g = g_row + r + nk_full - 1;
  for (int jj = 0; jj < nk; ++jj) g[-jj] = ds[jj];
}

// Per-(b, h) gradient partials, reduced over b (and heads, when shared) in fixed order at the end.
struct RelKeyPartials {
  std::vector<float> dr;   // [B·H, ncols, D] dR by distance column (learn_r)
  std::vector<double> du;  // [B·H, D]
  std::vector<double> dw;  // [B·H, D]
};
RelKeyPartials relkey_partials(const RelKeySetup& rs, int64_t bh_count);
// extra.drel_r / drel_u / drel_w += the partials (clamped distances folded onto their row of R).
void relkey_scatter_grad(const RelKeySetup& rs, const AttentionParams& p, const RelKeyPartials& part,
                         const AttentionGrads& extra);

}  // namespace stretch::ops::attn
