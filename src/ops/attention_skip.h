// ops/attention_skip.h — internal to the fused CPU attention kernel: key tiles whose probabilities
// are all negligible, skipped in the forward and the backward.
//
// With a distance penalty (linear ALiBi, the default) a query row's far keys carry probabilities
// far below float resolution: at slope 1/4, 256 keys back the bias alone is e^−64. The kernel
// already flushes every exp(score − m) at or below about e^−60 to exactly 0 (attention_exp.h:
// exp2_row_lazy's 2^kFlush2, exp_row's 1e−26), so a key tile whose scores all lie more than
// kSkipNats below the row's reference point m contributes exact zeros: nothing to the sum, the
// maximum or out. The forward visits key tiles from the diagonal backwards; before the product
// of a later tile it bounds every score of the tile from above, for each row r,
//   score_rj = scale·q_r·k_j + bias(rel)
//            ≤ scale·|q_r|·max_{j∈tile}|k_j|·(1 + kSlack) + bias_upper(the tile's rels),
// and skips the tile when the bound is more than kSkipNats below m_r for every row (m_r: the
// forward's running reference point, which the tile could not move; the backward's lse_r, from
// which it recomputes P). The result is bitwise the one of visiting the tile (for finite v and
// dout: 0·∞ would have made a NaN; a NaN or ∞ in q or k makes the bound NaN, never skipped).
// kSlack covers the rounding of the products and norms (fp32: D·2^−24 relative; bf16 operands:
// about 2^−8), the relative margin kRelMargin the rounding of scores, biases and unit conversions
// of large size.
//
// Only policies whose bias falls with distance ask (attn::Eval*::kBounded); with no penalty or a
// relative-key term / soft span mask (their own score terms) every tile is visited as before.
// Cost: one pass over K per call for the tile norms, |q_r| per query tile, and ≤ kBq
// multiply-adds per tile test (leaving at the first row that must be visited).
#pragma once
#include <cmath>

#include "ops/attention_cpu_common.h"

namespace stretch::ops::attn_cpu {

inline constexpr float kSkipNats = 61.f;  // > the flush points e^−59.96 (log2 path) and e^−59.87
inline constexpr float kSlack = 1.f / 64;
inline constexpr float kRelMargin = 1e-5f;

// Whether this call may skip: the switch is On and the policy's bias falls with distance, with no
// score term of its own (relative keys, soft span mask) — every tile is visited otherwise.
template <class Eval>
bool skipping_applies(const RelKeySetup& rs, const SpanMaskSetup& sm) {
  return Eval::kBounded && !rs.on && !sm.on && attention_tile_skipping() == TileSkipping::On;
}
// Adds one call's (query tile, key tile) pairs to attention_tile_counts().
void count_tiles(int64_t visited, int64_t skipped);

// kn [B·H, n_kt]: max |k_j| over each key tile's keys (rows addressed by g.ks).
inline void key_tile_norms(float* kn, const float* k, const Geo& g) {
  const int64_t BH = g.B * g.H, D = g.D, ld = g.ks.row;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t kt = 0; kt < g.n_kt; ++kt) {
      float mx = 0.f;
      for (int64_t j = kt * kBk; j < std::min(g.S, (kt + 1) * kBk); ++j) {
        const float* r = k + g.k_at(bh) + j * ld;
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t x = 0; x < D; ++x) s += r[x] * r[x];
        mx = std::max(mx, s);
      }
      kn[bh * g.n_kt + kt] = std::sqrt(mx);
    }
}

// qn [mq] = |q_r| for the rows of one query tile (stride ld).
inline void row_norms(float* qn, const float* q, int64_t ld, int mq, int64_t D) {
  for (int r = 0; r < mq; ++r) {
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t x = 0; x < D; ++x) s += q[r * ld + x] * q[r * ld + x];
    qn[r] = std::sqrt(s);
  }
}

// True when no score of rows p0 .. p0 + mq − 1 against keys [j0, j0 + nk) comes within kSkipNats
// of the row's reference point ref[r] (log2 units when log2, else natural). kn_tile: the tile's
// max |k|.
template <class Eval>
bool tile_negligible(const Eval& ev, const float* qn, const float* ref, bool log2, int mq, int64_t p0, int64_t j0,
                     int nk, float kn_tile, float scale) {
  const float c = scale * kn_tile * (1.f + kSlack);
  for (int r = 0; r < mq; ++r) {
    if (ref[r] == kNegInf) return false;
    const float m = log2 ? ref[r] * static_cast<float>(kLn2) : ref[r];
    const int64_t pos = p0 + r;
    const float bound =
        c * qn[r] + ev.bias_upper(static_cast<int32_t>(j0 - pos), static_cast<int32_t>(j0 + nk - 1 - pos));
    const float margin = kRelMargin * std::max(std::fabs(bound), std::fabs(m));
    if (!(bound + margin < m - kSkipNats)) return false;
  }
  return true;
}

// Masked tiles, row block by row block. A causal (or windowed) row sees the tile's keys up to a
// bound that grows with the row, so every product over a block of kTrimRows rows whose other
// operand runs over keys (S = Q·Kᵀ, dP = dO·Vᵀ: columns; O += P·V, dQ += dS·K: the summed
// dimension) can stop at the bound of the block's last row: past it the scores are masked (−inf),
// P and dS exact zeros, and the terms left out add exact zeros (bitwise the whole tile's result,
// as for skipped tiles). On a diagonal tile that is 25% of each column-bounded product and ~44%
// of each summed one. Where skipping's switch is On and there is no score term of its own
// (relative keys, span mask); with it Off every block takes the whole tile.
// A block is the tile product's micro-kernel rows (8 with AVX-512, 6 with AVX2): the products run
// block by block on every tile, and blocks of 8 on AVX2 were a 6-row and a 2-row micro-kernel call
// each, a quarter of the rows at the 2-row kernel's rate (docs/architecture.md).
inline constexpr int kTrimRows = attn::kMr;
struct BlockKeys {
  int end[(kBq + kTrimRows - 1) / kTrimRows];  // keys [0, end[i]) of the tile for rows [kTrimRows·i, kTrimRows·(i + 1))
};
// Keys [0, end) of rows [rb, rb + rows): the largest end among their blocks (a bf16 product on
// the AMX tiles takes 16 rows, two blocks; past a row's own end its terms are exact zeros).
inline int rows_key_end(const BlockKeys& e, int rb, int rows) {
  int end = 0;
  for (int i = rb / kTrimRows; i * kTrimRows < rb + rows; ++i) end = std::max(end, e.end[i]);
  return end;
}
inline bool trimming_applies(const RelKeySetup& rs, const SpanMaskSetup& sm) {
  return !rs.on && !sm.on && attention_tile_skipping() == TileSkipping::On;
}
inline BlockKeys block_key_ends(const Geo& g, int64_t p0, int64_t j0, int nk, int mq, bool trim) {
  BlockKeys b{};
  for (int i = 0; i * kTrimRows < mq; ++i) {
    const int last = std::min(mq, (i + 1) * kTrimRows) - 1;
    b.end[i] = trim ? static_cast<int>(std::clamp<int64_t>(row_keys(g, p0 + last).hi - j0, 0, nk)) : nk;
  }
  return b;
}
// The fp32 tile product's columns for `end` keys: whole kLanes vectors (tile_gemm's half block is
// bitwise a full block's; its element tail is not used), at most kBk.
inline int fp32_columns(int end) { return std::min(kBk, (end + attn::kLanes - 1) / attn::kLanes * attn::kLanes); }

}  // namespace stretch::ops::attn_cpu
