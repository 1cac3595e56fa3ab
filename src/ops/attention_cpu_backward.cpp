// ops/attention_cpu_backward.cpp — the fused CPU attention kernel's backward and its schedules
// (contract in ops/attention.h; what it shares with the forward in ops/attention_cpu_common.h).
//
// Backward, per (b, h) (one thread owns all of a head's dK, dV and dQ, so the result is
// bitwise identical for any thread count), or, when B·H is too small to keep the threads busy, per
// key tile (its dK, dV) and per query tile (its dQ), each recomputing its tiles' P and dS and
// summing the same terms in the same order, so bitwise the same again (split_schedule below):
// delta_i = dout_i·out_i first; then for each key
// tile, accumulating dK_tile and dV_tile in registers-near buffers, for each query tile that
// sees it: recompute S and P = exp(s − lse_i), dP = dO·Vᵀ, dS = P ∘ (dP·Z − delta),
// dV += (P∘Z)ᵀ dO, dK += scale·dSᵀ Q, dQ += scale·dS K, and for learnable bias parameters
// g_h[j − p_i] += dS (reduced to ∂L/∂θ by attention_bias.cpp, summed over b in fixed order).
// With the relative-key term the head's tiles are visited query tile first instead, so that each
// query tile's band G is complete before its products with R (docs/architecture.md).
// With linear ALiBi a (key tile, query tile) pair whose P would flush to zero in every entry
// (attention_skip.h: bounded from |q|, max |k|, the bias and lse) is skipped: it adds exact zeros.
// On a masked pair S, dP and dQ's product stop at each 8-row block's last visible key (BlockKeys).
#include "ops/attention_cpu_common.h"
#include "ops/attention_skip.h"

namespace stretch::ops {
namespace {

using namespace attn_cpu;

struct BwdScratch {
  float* s;   // [kBq, kBk] scores, then P∘Z
  float* dp;  // [kBq, kBk] dP, then scale·dS
  float* dk;  // [kBk, D] dK accumulator of one key tile
  float* dv;  // [kBk, D] dV accumulator of one key tile
  float* z;   // [kBk] dropout factors of one row
  attn::BiasGrad grad;  // learnable bias state of the current (b, h)
  // Relative-key term (null without it):
  float* qc = nullptr;     // [T, D] q + u of the current head
  float* qr = nullptr;     // [T, D] q + w
  float* band = nullptr;   // [kBq, band_ld] (q + w)·R over the distances of a query tile's key tiles
  float* gband = nullptr;  // [kBq, band_ld] scale·dS scattered by distance
  float* gt = nullptr;     // [band_ld, kBq] gband transposed (dR's product)
  float* gdist = nullptr;  // [ncols] Σ scale·dS per distance (dw)
  float* ccol = nullptr;   // [s_pad] Σ_i scale·dS_ij per key (du)
  // The bf16 path (null without it); there dk and dv hold dKᵀ, dVᵀ [D, kBk]:
  uint16_t* qb = nullptr;   // [T, dp2] the head's q in bf16 (A of S = Q·Kᵀ)
  uint16_t* dob = nullptr;  // [T, dp2] dout in bf16 (A of dP = dO·Vᵀ)
  uint16_t* qt = nullptr;   // [D, tp2] qᵀ (A of dKᵀ += Qᵀ·dS)
  uint16_t* dot = nullptr;  // [D, tp2] doutᵀ (A of dVᵀ += dOᵀ·(P∘Z))
  uint16_t* pp = nullptr;   // [kBq / 2, kBk, 2] P∘Z pair-packed over queries
  uint16_t* dsp = nullptr;  // [kBq / 2, kBk, 2] scale·dS pair-packed over queries
  uint16_t* dsb = nullptr;  // [kBq, kBk] scale·dS rows (A of dQ += dS·K)
  // Negligible pairs (attention_skip.h; null when the call does not skip), shared by all threads:
  const float* kn = nullptr;  // [B·H, n_kt] max |k| per key tile
  const float* qn = nullptr;  // [B·H, T] |q_i|
  int64_t visited = 0, skipped = 0;  // pairs of this thread
  bool trim = false;  // masked tiles by row blocks (attention_skip.h)
};

#if STRETCH_ATTN_BF16
// Per-thread bf16 scratch of the backward (BwdScratch's bf16 fields), in uint16_t elements.
size_t bwd_bf16_elems(const Geo& g, const Bf16Packs& bp) {
  const int64_t tp2 = (g.T + 1) / 2 * 2;
  return static_cast<size_t>(2 * g.T * bp.dp2 + 2 * g.D * tp2 + 3 * kBq * kBk);
}
#endif
// dst rows [0, nk) (row stride ldd, D columns) = (overwrite ? 0 : dst) + accᵀ for the bf16 path's
// transposed accumulator acc [D, kBk] (every kBk column written). By kLanes × kLanes blocks
// transposed in registers where D is a multiple of kLanes (a strided element loop was ~5% of a bf16
// training step once the tile products ran on AMX), else element by element; the same sums.
void add_transposed(float* dst, int64_t ldd, const float* acc, int nk, int64_t D, bool overwrite) {
  using attn::kLanes;
  if (D % kLanes != 0) {
    for (int jj = 0; jj < nk; ++jj)
      for (int64_t x = 0; x < D; ++x) dst[jj * ldd + x] = (overwrite ? 0.f : dst[jj * ldd + x]) + acc[x * kBk + jj];
    return;
  }
  for (int64_t x0 = 0; x0 < D; x0 += kLanes)
    for (int j0 = 0; j0 < nk; j0 += kLanes) {
      attn::VecF r[kLanes];
      for (int y = 0; y < kLanes; ++y) r[y] = *reinterpret_cast<const attn::VecFU*>(acc + (x0 + y) * kBk + j0);
      attn::transpose_regs(r);  // r[c]: key j0 + c, dimensions x0 .. x0 + kLanes − 1
      for (int c = 0; c < kLanes && j0 + c < nk; ++c) {
        attn::VecFU* d = reinterpret_cast<attn::VecFU*>(dst + (j0 + c) * ldd + x0);
        *d = (overwrite ? attn::VecF{} : attn::VecF(*d)) + r[c];
      }
    }
}

void bwd_bf16_scratch(BwdScratch& w, uint16_t* base, const Geo& g, const Bf16Packs& bp) {
  const int64_t tp2 = (g.T + 1) / 2 * 2;
  w.qb = base;
  w.dob = w.qb + g.T * bp.dp2;
  w.qt = w.dob + g.T * bp.dp2;
  w.dot = w.qt + g.D * tp2;
  w.pp = w.dot + g.D * tp2;
  w.dsp = w.pp + kBq * kBk;
  w.dsb = w.dsp + kBq * kBk;
}

// Queries [lo, hi) that see at least one key of [j0, j0 + nk) (before key padding).
struct QueryRange {
  int64_t lo, hi;
};
QueryRange key_tile_queries(const Geo& g, int64_t j0, int nk) {
  QueryRange r{0, g.T};
  if (g.causal) r.lo = std::max<int64_t>(0, j0 + g.md - g.off);
  if (g.W > 0) {
    if (!g.causal) r.lo = std::max<int64_t>(0, j0 - g.W + 1 - g.off);
    r.hi = std::min<int64_t>(g.T, j0 + nk + g.W - 1 - g.off);
  }
  return r;
}

// One backward task of (b, h): the whole head (dQ, dK, dV and every bias, relative-key and span
// partial), or in the split schedule the dK and dV of key tile `tile` (KeyTile) or the dQ of query
// tile `tile` (QueryTile). Every accumulator sums over the same tiles in the same order in all three.
enum class BwdPart : uint8_t { Head, KeyTile, QueryTile };
struct BwdTask {
  int64_t bh;
  BwdPart part;
  int64_t tile;
};

// Bf: the bf16 path (the five tile products in bf16 from bp and w's bf16 fields, dK and dV
// accumulated transposed; everything else as in fp32).
template <class Eval, bool Bf>
void backward_head(const Geo& g, const BiasSetup& bs, const RelKeySetup& rs, const SpanMaskSetup& sm,
                   double* dz_part, attn::RelKeyPartials& part,
                   const uint8_t* pad_tile, BwdTask task, float* dq, float* dk, float* dv, const float* dout,
                   const float* q, const float* k, const float* lse, const float* delta, const float* kt_pack,
                   const float* vt_pack, const Bf16Packs& bp, bool overwrite, BwdScratch& w) {
  const int64_t bh = task.bh, b = bh / g.H, h = bh % g.H, D = g.D, T = g.T;
  const bool do_kv = task.part != BwdPart::QueryTile, do_q = task.part != BwdPart::KeyTile;
  // Key tiles this task visits and the query rows [r_lo, r_hi) it reads.
  int64_t kt_lo = 0, kt_hi = g.n_kt, r_lo = 0, r_hi = T;
  if (task.part == BwdPart::KeyTile) {
    kt_lo = task.tile, kt_hi = task.tile + 1;
    const int64_t j0 = kt_lo * kBk;
    const QueryRange qr = key_tile_queries(g, j0, static_cast<int>(std::min<int64_t>(kBk, g.S - j0)));
    r_lo = std::min(T, qr.lo / kBq * kBq);
    r_hi = std::max(r_lo, std::min(T, (qr.hi + kBq - 1) / kBq * kBq));
  } else if (task.part == BwdPart::QueryTile) {
    r_lo = task.tile * kBq, r_hi = std::min(T, r_lo + kBq);
  }
  const int rows = static_cast<int>(r_hi - r_lo);
  const int64_t ldq = g.qs.row, ldk = g.ks.row, ldo = g.os.row;
  const float* Q = q + g.q_at(bh);
  const float* dO = dout + g.o_at(bh);
  const float* K = k + g.k_at(bh);
  const float* Kt = kt_pack + bh * D * g.s_pad;
  const float* Vt = vt_pack + bh * D * g.s_pad;
  float* dQ = dq + g.q_at(bh);
  const bool learn = bs.n_params > 0;
  const Eval ev(bs, h);
  const float inf = std::numeric_limits<float>::infinity();
  attn::bias_grad_reset(bs, w.grad);
  if (overwrite && do_q)  // dQ accumulates over key tiles below
    for (int64_t i = r_lo; i < r_hi; ++i) std::fill(dQ + i * ldq, dQ + i * ldq + D, 0.f);
  // Relative-key term: (q + u) meets the keys, (q + w) meets R.
  const float* Qc = Q;
  const float* Qr = Q;
  int64_t ldqc = ldq, ldqr = ldq;
  if (rs.has_u)
    add_row_bias(w.qc + r_lo * D, Q + r_lo * ldq, ldq, rows, D, rs.u + h * D), Qc = w.qc, ldqc = D;
  if (rs.has_w)
    add_row_bias(w.qr + r_lo * D, Q + r_lo * ldq, ldq, rows, D, rs.w + h * D), Qr = w.qr, ldqr = D;
  float* dR = rs.learn_r ? part.dr.data() + bh * rs.ncols * D : nullptr;  // [ncols, D]
  if (dR != nullptr) std::fill_n(dR, rs.ncols * D, 0.f);
  double* dU = rs.learn_u ? part.du.data() + bh * D : nullptr;
  if (rs.learn_w) std::fill(w.gdist, w.gdist + rs.ncols, 0.f);
  [[maybe_unused]] const int64_t tp2 = (T + 1) / 2 * 2;
#if STRETCH_ATTN_BF16
  if constexpr (Bf) {  // the task's rows of q and dout in bf16, once per task
    attn::to_bf16_rows(w.qb + r_lo * bp.dp2, bp.dp2, Q + r_lo * ldq, ldq, rows, static_cast<int>(D));
    attn::to_bf16_rows(w.dob + r_lo * bp.dp2, bp.dp2, dO + r_lo * ldo, ldo, rows, static_cast<int>(D));
    if (do_kv) {  // a product over a last tile of odd length reads column T: zero up to tp2
      const int64_t width = r_hi == T ? tp2 - r_lo : rows;
      attn::to_bf16_transposed(w.qt + r_lo, tp2, Q + r_lo * ldq, ldq, rows, static_cast<int>(D), width);
      attn::to_bf16_transposed(w.dot + r_lo, tp2, dO + r_lo * ldo, ldo, rows, static_cast<int>(D), width);
    }
  }
#endif

  // The relative-key band of the current query tile (the query-outer order below): band and G
  // [kBq, ld_band] by distance from dist_lo = p0 − j_end + 1 over its key tiles' keys.
  const int64_t ld_band = attn::band_ld(kBq, g.s_pad);
  int64_t j_end = 0;

  // One (key tile, query tile) pair: S and dP, the row work, then dV += (P∘Z)ᵀ·dO and
  // dK += (scale·dS)ᵀ·Q into dk_acc / dv_acc (row stride ld_acc; transposed [D, kBk] on the bf16
  // path) and dQ += (scale·dS)·K. With the relative-key term the rows also read the query tile's
  // band and scatter scale·dS into its G, and ccol[j − j0] sums scale·dS over the rows (du).
  auto pair = [&](int64_t kt, int64_t qt, float* dk_acc, float* dv_acc, int64_t ld_acc, float* ccol) {
    const int64_t j0 = kt * kBk, i0 = qt * kBq;
    const int nk = static_cast<int>(std::min<int64_t>(kBk, g.S - j0));
    const int mq = static_cast<int>(std::min<int64_t>(kBq, T - i0));
    const int64_t p0 = g.off + i0, p1 = p0 + mq - 1;
    if (w.kn != nullptr && tile_negligible(ev, w.qn + bh * T + i0, lse + bh * T + i0, false, mq, p0, j0, nk,
                                           w.kn[bh * g.n_kt + kt], g.scale)) {
      ++w.skipped;
      return;
    }
    ++w.visited;
    const bool masked = !tile_all_visible(g, p0, p1, j0, nk, pad_tile[b * g.n_kt + kt] != 0);
    // S's and dP's columns and dQ's keys per block of rows (attention_skip.h): past a block's end
    // the scores are masked and dP is set to 0 below, so P and dS are exact zeros there.
    const BlockKeys ends = block_key_ends(g, p0, j0, nk, mq, w.trim && masked);
    // bf16: rows by 16 on the AMX tiles (rows_key_end), by block with vdpbf16ps.
    const int step = Bf ? bf16_product_rows(bp) : kTrimRows;
    for (int rb = 0; rb < mq; rb += step) {
      const int rows = std::min(step, mq - rb), end = rows_key_end(ends, rb, rows);
      if (end == 0) continue;
#if STRETCH_ATTN_BF16
      if constexpr (Bf) {
        const int64_t at = (bh * g.n_kt + kt) * bp.d_tile();
        const int n = bf16_key_columns(bp, end), d2 = static_cast<int>(bp.dp2 / 2);
        bf16_product<Init::Zero>(bp, rows, n, d2, w.qb + (i0 + rb) * bp.dp2, bp.dp2, bp.kd + at, kBk, w.s + rb * kBk,
                                 kBk);
        bf16_product<Init::Zero>(bp, rows, n, d2, w.dob + (i0 + rb) * bp.dp2, bp.dp2, bp.vd + at, kBk,
                                 w.dp + rb * kBk, kBk);
      } else
#endif
      {
        const int n = fp32_columns(end);
        tile_gemm<Init::Zero, ALayout::Rows>(rows, n, static_cast<int>(D), Qc + (i0 + rb) * ldqc, ldqc,
                                             Kt + kt * D * kBk, kBk, w.s + rb * kBk, kBk);
        tile_gemm<Init::Zero, ALayout::Rows>(rows, n, static_cast<int>(D), dO + (i0 + rb) * ldo, ldo,
                                             Vt + kt * D * kBk, kBk, w.dp + rb * kBk, kBk);
      }
    }
    for (int r = 0; r < mq; ++r) {
      const int64_t i = i0 + r, pos = p0 + r;
      float* s = w.s + r * kBk;
      float* dp = w.dp + r * kBk;
      std::fill(dp + ends.end[r / kTrimRows], dp + nk, 0.f);  // unwritten (masked keys): dS = P·(0 − δ) = 0
      const int32_t rel0 = static_cast<int32_t>(j0 - pos);
      if (rs.on) attn::relkey_add_row(s, nk, w.band + r * ld_band, r, j_end - j0);
      ev(s, nk, rel0, g.scale);
      if (sm.on && !sm.after) add_reversed(s, nk, sm.m_at(h, pos - j0));
      if (masked) mask_row(s, nk, g, b, pos, j0);
      const float L = lse[bh * T + i] == kNegInf ? inf : lse[bh * T + i];  // empty row: P = 0
      const float dl = delta[bh * T + i];
      attn::exp_row(s, nk, L);  // P
      const bool after_mask = sm.on && sm.after;
      if (g.dropout.p > 0.f || after_mask) {
        if (g.dropout.p > 0.f) dropout_row(w.z, nk, g, bh, i, j0);
        else std::fill(w.z, w.z + nk, 1.f);
        if (after_mask) {  // Z ← Z·m; ∂L/∂z_h += Σ P·Z·(dO·v)·∂m/∂z (delta = dO·out unchanged)
          const float* mt = sm.m_at(h, pos - j0);
          const float* dt = sm.dz_at(h, pos - j0);
          float acc = 0.f;
          for (int jj = 0; jj < nk; ++jj) {
            acc += s[jj] * dp[jj] * w.z[jj] * dt[-jj];
            w.z[jj] *= mt[-jj];
          }
          if (sm.learn) dz_part[bh] += acc;
        }
#pragma omp simd
        for (int jj = 0; jj < nk; ++jj) {
          dp[jj] = s[jj] * (dp[jj] * w.z[jj] - dl);
          s[jj] *= w.z[jj];
        }
      } else {
#pragma omp simd
        for (int jj = 0; jj < nk; ++jj) dp[jj] = s[jj] * (dp[jj] - dl);
      }
      if (sm.learn && !sm.after) {  // score += log m: ∂L/∂z_h += Σ dS·(∂m/∂z)/m
        const float* dt = sm.dz_at(h, pos - j0);
        float acc = 0.f;
        for (int jj = 0; jj < nk; ++jj) acc += dp[jj] * dt[-jj];
        dz_part[bh] += acc;
      }
      if (learn) ev.grad(dp, nk, rel0, w.grad);
#pragma omp simd
      for (int jj = 0; jj < nk; ++jj) dp[jj] *= g.scale;
      if (rs.on) attn::relkey_scatter_row(w.gband + r * ld_band, dp, nk, r, j_end - j0);
      if (ccol != nullptr)
#pragma omp simd
        for (int jj = 0; jj < nk; ++jj) ccol[jj] += dp[jj];
    }
#if STRETCH_ATTN_BF16
    if constexpr (Bf) {  // dVᵀ += dOᵀ·(P∘Z), dKᵀ += Qᵀ·(scale·dS), dQ += (scale·dS)·K
      const int q2 = (mq + 1) / 2;
      if (do_kv) {
        attn::pack_row_pairs(w.pp, kBk, w.s, kBk, mq, nk);
        attn::pack_row_pairs(w.dsp, kBk, w.dp, kBk, mq, nk);
        // (q2 is not padded: past the task's rows and the tile's pairs the operands are not zeros)
        bf16_product<Init::Accumulate>(bp, static_cast<int>(D), kBk, q2, w.dot + i0, tp2, w.pp, kBk, dv_acc, kBk);
        bf16_product<Init::Accumulate>(bp, static_cast<int>(D), kBk, q2, w.qt + i0, tp2, w.dsp, kBk, dk_acc, kBk);
      }
      if (do_q) {
        attn::to_bf16_rows(w.dsb, kBk, w.dp, kBk, mq, nk);
        for (int rb = 0; rb < mq; rb += step) {
          const int rows = std::min(step, mq - rb), end = rows_key_end(ends, rb, rows);
          if (end > 0)
            bf16_product<Init::Accumulate>(bp, rows, static_cast<int>(D), bf16_key_pairs(bp, end), w.dsb + rb * kBk,
                                           kBk, bp.kj + (bh * g.n_kt + kt) * bp.j_tile(), bp.ldn,
                                           dQ + (i0 + rb) * ldq, ldq);
        }
      }
      return;
    }
#endif
    if (do_kv) {
      tile_gemm<Init::Accumulate, ALayout::Cols>(nk, static_cast<int>(D), mq, w.s, kBk, dO + i0 * ldo, ldo, dv_acc,
                                                 ld_acc);
      tile_gemm<Init::Accumulate, ALayout::Cols>(nk, static_cast<int>(D), mq, w.dp, kBk, Qc + i0 * ldqc, ldqc,
                                                 dk_acc, ld_acc);
    }
    if (do_q)
      for (int rb = 0; rb < mq; rb += kTrimRows) {
        const int end = ends.end[rb / kTrimRows];
        if (end > 0)
          tile_gemm<Init::Accumulate, ALayout::Rows>(std::min(kTrimRows, mq - rb), static_cast<int>(D), end,
                                                     w.dp + rb * kBk, kBk, K + j0 * ldk, ldk, dQ + (i0 + rb) * ldq, ldq);
      }
  };

  if (rs.on) {
    // Query tiles outer (the head schedule only: split_allowed): each query tile's band over all
    // its key tiles is computed once, and its G is complete before the band's backward products,
    // which are then as deep as the tile's keys. dK and dV accumulate in place over query tiles
    // (the same sums in the same order as the key-outer accumulators), ccol over all S keys.
    float* dK = dk + g.k_at(bh);
    float* dV = dv + g.k_at(bh);
    if (overwrite)
      for (int64_t j = 0; j < g.S; ++j) {
        std::fill(dK + j * ldk, dK + j * ldk + D, 0.f);
        std::fill(dV + j * ldk, dV + j * ldk + D, 0.f);
      }
    if (rs.learn_u) std::fill(w.ccol, w.ccol + g.s_pad, 0.f);
    for (int64_t qt = r_lo / kBq; qt * kBq < r_hi; ++qt) {
      const int64_t i0 = qt * kBq;
      const int mq = static_cast<int>(std::min<int64_t>(kBq, T - i0));
      const int64_t p0 = g.off + i0, p1 = p0 + mq - 1;
      const int64_t kt_first = row_keys(g, p0).lo / kBk, kt_last = (row_keys(g, p1).hi - 1) / kBk;
      if (kt_last < kt_first) continue;  // no key visible to these rows
      j_end = (kt_last + 1) * kBk;
      const int64_t nspan = j_end - kt_first * kBk, dist_lo = p0 - j_end + 1;
      attn::relkey_band(rs, h, mq, nspan, Qr + i0 * ldqr, ldqr, dist_lo, w.band, ld_band);
      const int64_t width = (mq + nspan - 1 + attn::kLanes - 1) / attn::kLanes * attn::kLanes;
      for (int r = 0; r < mq; ++r) std::fill_n(w.gband + r * ld_band, width, 0.f);
      for (int64_t kt = kt_first; kt <= kt_last; ++kt) {
        const int64_t j0 = kt * kBk;
        pair(kt, qt, dK + j0 * ldk, dV + j0 * ldk, ldk, rs.learn_u ? w.ccol + j0 : nullptr);
      }
      // the band of scale·dS against R: dQ += G·R_band, dR_band += Gᵀ(Q + w), dw via Σ_r G
      const int64_t c0 = kRelPad + dist_lo;
      attn::relkey_band_backward(rs, h, mq, nspan, w.gband, ld_band, Qr + i0 * ldqr, ldqr, dist_lo, dQ + i0 * ldq,
                                 ldq, dR != nullptr ? dR + c0 * D : nullptr, w.gt, kBq);
      if (rs.learn_w)
        for (int r = 0; r < mq; ++r) {  // row r's band entries r .. r + nspan − 1
          const float* gr = w.gband + r * ld_band + r;
          float* gd = w.gdist + c0 + r;
#pragma omp simd
          for (int64_t x = 0; x < nspan; ++x) gd[x] += gr[x];
        }
    }
    if (dU != nullptr)  // du += Σ_j (Σ_i scale·dS_ij) k_j
      for (int64_t j = 0; j < g.S; ++j)
        for (int64_t x = 0; x < D; ++x) dU[x] += static_cast<double>(w.ccol[j]) * K[j * ldk + x];
    if (rs.learn_w) {  // dw = Σ_dist (Σ scale·dS at dist) R[dist]
      double* dW = part.dw.data() + bh * D;
      const float* R = rs.rrow_head(h);
      for (int64_t c = 0; c < rs.ncols; ++c) {
        if (w.gdist[c] == 0.f) continue;
        for (int64_t x = 0; x < D; ++x) dW[x] += static_cast<double>(w.gdist[c]) * R[c * D + x];
      }
    }
    return;
  }

  for (int64_t kt = kt_lo; kt < kt_hi; ++kt) {  // key tiles outer
    const int64_t j0 = kt * kBk;
    const int nk = static_cast<int>(std::min<int64_t>(kBk, g.S - j0));
    const QueryRange qr = key_tile_queries(g, j0, nk);
    float* dK = dk + g.k_at(bh) + j0 * ldk;
    float* dV = dv + g.k_at(bh) + j0 * ldk;
    if (qr.lo >= qr.hi) {  // no query sees these keys
      if (overwrite && do_kv)
        for (int jj = 0; jj < nk; ++jj) {
          std::fill(dK + jj * ldk, dK + jj * ldk + D, 0.f);
          std::fill(dV + jj * ldk, dV + jj * ldk + D, 0.f);
        }
      continue;
    }
    int64_t qt_lo = qr.lo / kBq, qt_hi = (qr.hi + kBq - 1) / kBq;
    if (task.part == BwdPart::QueryTile) {
      if (task.tile < qt_lo || task.tile >= qt_hi) continue;
      qt_lo = task.tile, qt_hi = task.tile + 1;
    }
    if (do_kv) {
      std::fill(w.dk, w.dk + (Bf ? kBk : nk) * D, 0.f);
      std::fill(w.dv, w.dv + (Bf ? kBk : nk) * D, 0.f);
    }
    for (int64_t qt = qt_lo; qt < qt_hi; ++qt) pair(kt, qt, w.dk, w.dv, D, nullptr);
    if (!do_kv) continue;
    if (Bf) {  // from the transposed accumulators
      add_transposed(dK, ldk, w.dk, nk, D, overwrite);
      add_transposed(dV, ldk, w.dv, nk, D, overwrite);
      continue;
    }
    for (int jj = 0; jj < nk; ++jj) {
      float* dk_row = dK + jj * ldk;
      float* dv_row = dV + jj * ldk;
      const float* sk = w.dk + jj * D;
      const float* sv = w.dv + jj * D;
      if (overwrite) {
        std::copy(sk, sk + D, dk_row);
        std::copy(sv, sv + D, dv_row);
      } else {
#pragma omp simd
        for (int64_t x = 0; x < D; ++x) {
          dk_row[x] += sk[x];
          dv_row[x] += sv[x];
        }
      }
    }
  }
}

std::atomic<BackwardSchedule> g_schedule{BackwardSchedule::Auto};

// Learnable biases, the relative-key term and a learnable span keep the head schedule: their
// per-head partials sum over every tile of the head.
bool split_allowed(const BiasSetup& bs, const RelKeySetup& rs, const SpanMaskSetup& sm) {
  return bs.n_params == 0 && !rs.on && !sm.learn;
}
// The split schedule does ~7/5 of the products (a key-tile task computes S, dP, dV, dK; a
// query-tile task S, dP, dQ), so it pays where 7·B·H < 5·threads·⌈B·H / threads⌉ (one head on 2
// threads; 4 on 8).
bool split_pays(int64_t bh_count, int nthr) {
  const int64_t rounds = (bh_count + nthr - 1) / nthr;
  return 7 * bh_count < 5 * nthr * rounds;
}
bool split_schedule(int64_t bh_count, int nthr, const BiasSetup& bs, const RelKeySetup& rs,
                    const SpanMaskSetup& sm) {
  switch (g_schedule.load(std::memory_order_relaxed)) {
    case BackwardSchedule::Head: return false;
    case BackwardSchedule::Split: return split_allowed(bs, rs, sm);
    case BackwardSchedule::Auto: break;
  }
  return split_allowed(bs, rs, sm) && split_pays(bh_count, nthr);
}

// The tasks of one backward call, largest first (dynamic scheduling): per (b, h) in order, or
// split into key-tile and query-tile tasks weighted by the tile products they compute.
std::vector<BwdTask> backward_tasks(const Geo& g, bool split) {
  const int64_t BH = g.B * g.H;
  std::vector<BwdTask> tasks;
  if (!split) {
    for (int64_t bh = 0; bh < BH; ++bh) tasks.push_back({bh, BwdPart::Head, 0});
    return tasks;
  }
  std::vector<int64_t> key_cost(static_cast<size_t>(g.n_kt), 0), query_cost(static_cast<size_t>(g.n_qt), 0);
  for (int64_t kt = 0; kt < g.n_kt; ++kt) {
    const QueryRange qr = key_tile_queries(g, kt * kBk, static_cast<int>(std::min<int64_t>(kBk, g.S - kt * kBk)));
    if (qr.lo >= qr.hi) continue;
    for (int64_t qt = qr.lo / kBq; qt * kBq < qr.hi; ++qt) key_cost[kt] += 4, query_cost[qt] += 3;
  }
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t kt = 0; kt < g.n_kt; ++kt) tasks.push_back({bh, BwdPart::KeyTile, kt});
    for (int64_t qt = 0; qt < g.n_qt; ++qt) tasks.push_back({bh, BwdPart::QueryTile, qt});
  }
  auto cost = [&](const BwdTask& t) { return t.part == BwdPart::KeyTile ? key_cost[t.tile] : query_cost[t.tile]; };
  std::stable_sort(tasks.begin(), tasks.end(), [&](const BwdTask& a, const BwdTask& b) { return cost(a) > cost(b); });
  return tasks;
}

template <class Eval, bool Bf>
void backward_run(const Geo& g, const BiasSetup& bs, const RelKeySetup& rs, const SpanMaskSetup& sm,
                  const AttentionParams& p,
                  const AttentionGrads& extra, float* dq, float* dk, float* dv, const float* dout, const float* q,
                  const float* k, const float* v, const float* out, const float* lse, bool overwrite) {
  const int64_t BH = g.B * g.H, D = g.D, T = g.T;
  PoolArray<float> delta(static_cast<size_t>(BH * T));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int64_t at = g.o_at(r / T) + (r % T) * g.os.row;
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int64_t d = 0; d < D; ++d) acc += dout[at + d] * out[at + d];
    delta[r] = acc;
  }
  PoolArray<float> kt_pack(Bf ? 0 : static_cast<size_t>(BH * D * g.s_pad));
  PoolArray<float> vt_pack(Bf ? 0 : static_cast<size_t>(BH * D * g.s_pad));
  if (!Bf) {
    pack_transposed(kt_pack.data(), k, g);
    pack_transposed(vt_pack.data(), v, g);
  }
  Bf16Packs bp;
#if STRETCH_ATTN_BF16
  const Bf16PackStore store(g, Bf ? k : nullptr, Bf ? v : nullptr, Bf ? k : nullptr, nullptr);
  bp = store.p;
  const size_t per16 = Bf ? bwd_bf16_elems(g, bp) : 0;
#else
  const size_t per16 = 0;
#endif
  PoolArray<uint16_t> scratch16(per16 * static_cast<size_t>(omp_get_max_threads()));
  PoolArray<uint8_t> pad_tile(static_cast<size_t>(g.B * g.n_kt));
  padded_tiles(pad_tile.data(), g);
  const bool skip = skipping_applies<Eval>(rs, sm);
  PoolArray<float> kn(skip ? static_cast<size_t>(BH * g.n_kt) : 0);
  PoolArray<float> qn(skip ? static_cast<size_t>(BH * T) : 0);
  if (skip) {
    key_tile_norms(kn.data(), k, g);
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh) row_norms(qn.data() + bh * T, q + g.q_at(bh), g.qs.row, static_cast<int>(T), D);
  }
  const size_t n_partial = static_cast<size_t>(BH) * bs.n_params;
  PoolArray<double> partial(n_partial);
  std::fill(partial.data(), partial.data() + n_partial, 0.0);

  attn::RelKeyPartials part = attn::relkey_partials(rs, BH);
  std::vector<double> dz_part(static_cast<size_t>(BH), 0.0);  // ∂L/∂z_h per (b, h)

  const int nthr = omp_get_max_threads();
  const std::vector<BwdTask> tasks = backward_tasks(g, split_schedule(BH, nthr, bs, rs, sm));
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  const size_t base_n = static_cast<size_t>(2 * kBq * kBk + 2 * kBk * D + kBk) + attn::bias_grad_floats(bs);
  const int64_t ld_band = attn::band_ld(kBq, g.s_pad);
  const size_t rel_n = rs.on ? static_cast<size_t>(2 * T * D + 3 * kBq * ld_band + rs.ncols + g.s_pad) : 0;
  const size_t per = base_n + rel_n;
  PoolArray<float> scratch(per * nthr);
#pragma omp parallel num_threads(nthr)
  {
    float* base = scratch.data() + per * omp_get_thread_num();
    BwdScratch w{base, base + kBq * kBk, base + 2 * kBq * kBk, base + 2 * kBq * kBk + kBk * D,
                 base + 2 * kBq * kBk + 2 * kBk * D, attn::BiasGrad{}};
    if (attn::bias_grad_floats(bs) > 0) w.grad.g = base + 2 * kBq * kBk + 2 * kBk * D + kBk;
    if (rs.on) {
      float* rb = base + base_n;
      w.qc = rb;
      w.qr = rb + T * D;
      w.band = rb + 2 * T * D;
      w.gband = w.band + kBq * ld_band;
      w.gt = w.gband + kBq * ld_band;
      w.gdist = w.gt + kBq * ld_band;
      w.ccol = w.gdist + rs.ncols;
    }
    if (Bf) bwd_bf16_scratch(w, scratch16.data() + per16 * omp_get_thread_num(), g, bp);
#if STRETCH_ATTN_AMX
    const attn::AmxTiles tiles(Bf && bp.amx);  // this thread's tiles, for its tasks' products
#endif
    if (skip) w.kn = kn.data(), w.qn = qn.data();
    w.trim = trimming_applies(rs, sm);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < n_tasks; ++t) {
      const BwdTask task = tasks[t];
      backward_head<Eval, Bf>(g, bs, rs, sm, dz_part.data(), part, pad_tile.data(), task, dq, dk, dv, dout, q, k,
                              lse, delta.data(), kt_pack.data(), vt_pack.data(), bp, overwrite, w);
      if (bs.n_params > 0)  // head schedule only (split_schedule)
        attn::bias_reduce_grad(bs, p, task.bh % g.H, w.grad, partial.data() + task.bh * bs.n_params);
    }
    count_tiles(w.visited, w.skipped);
  }
  attn::bias_scatter_grad(bs, p, partial.data(), extra);
  if (rs.learn()) attn::relkey_scatter_grad(rs, p, part, extra);
  if (sm.learn)  // fixed order over (h, b)
    for (int64_t h = 0; h < g.H; ++h) {
      double acc = 0.0;
      for (int64_t b = 0; b < g.B; ++b) acc += dz_part[b * g.H + h];
      extra.dspan_z[p.span.heads == 1 ? 0 : h] += static_cast<float>(acc);
    }
}
}  // namespace

void set_attention_backward_schedule(BackwardSchedule s) { g_schedule.store(s, std::memory_order_relaxed); }
BackwardSchedule attention_backward_schedule() { return g_schedule.load(std::memory_order_relaxed); }

bool attention_backward_splits(const AttentionParams& p, int threads, const AttentionGrads& extra) {
  attention_check(p);
  const BiasSetup bs = attn::bias_setup(p, wants_grad(p, extra));
  const RelKeySetup rs = attn::relkey_setup(p, &extra);
  const SpanMaskSetup sm = attn::span_mask_setup(p, &extra);
  return split_allowed(bs, rs, sm) && split_pays(p.b * p.h, threads);
}

void attention_backward(float* dq, float* dk, float* dv, const AttentionGrads& extra, const float* dout,
                        const float* q, const float* k, const float* v, const float* out, const float* lse,
                        const AttentionParams& p, GradInit init) {
  const Geo g = make_geo(p);
  const bool ow = init == GradInit::Overwrite;
  const BiasSetup bs = attn::bias_setup(p, wants_grad(p, extra));
  const RelKeySetup rs = attn::relkey_setup(p, &extra);
  const SpanMaskSetup sm = attn::span_mask_setup(p, &extra);
  with_precision(use_bf16(rs, sm), [&](auto bf) {
    constexpr bool Bf = decltype(bf)::value;
    switch (bs.eval) {
      case BiasEval::None:
        return backward_run<attn::EvalNone, Bf>(g, bs, rs, sm, p, extra, dq, dk, dv, dout, q, k, v, out, lse, ow);
      case BiasEval::Linear:
        return backward_run<attn::EvalLinear, Bf>(g, bs, rs, sm, p, extra, dq, dk, dv, dout, q, k, v, out, lse, ow);
      case BiasEval::SymLinear:
        return backward_run<attn::EvalSymLinear, Bf>(g, bs, rs, sm, p, extra, dq, dk, dv, dout, q, k, v, out, lse,
                                                     ow);
      case BiasEval::AlibiShaped:
        return backward_run<attn::EvalAlibiShaped, Bf>(g, bs, rs, sm, p, extra, dq, dk, dv, dout, q, k, v, out, lse,
                                                       ow);
      case BiasEval::Table:
        return backward_run<attn::EvalTable, Bf>(g, bs, rs, sm, p, extra, dq, dk, dv, dout, q, k, v, out, lse, ow);
    }
  });
}
}  // namespace stretch::ops
