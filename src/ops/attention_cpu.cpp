// ops/attention_cpu.cpp — the fused CPU attention kernel (contract in ops/attention.h).
//
// Forward, per (b, h, query tile of kBq rows), OpenMP-parallel with the largest causal tiles
// scheduled first: for each key tile of kBk keys that holds at least one visible key,
//   S = Q_tile · K_tileᵀ (tile_gemm on a per-call transposed copy of K, [D, S]),
//   s = scale·S + bias (policy evaluator, template), mask (only on tiles that need it),
//   online softmax (running max m, running sum l, rescale of the output accumulator),
//   dropout on the probabilities, O += P · V_tile.
// Causal tiles entirely above the diagonal and tiles entirely outside the window are never
// visited; with linear ALiBi neither are earlier key tiles whose probabilities would all flush to
// zero (attention_skip.h: a bound from |q|, max |k| and the bias; bitwise the same out and lse).
// On a masked tile (the diagonal one) S and P·V stop, for each block of 8 rows, at the block's
// last visible key (attention_skip.h, BlockKeys): what lies past it is masked, its P exactly 0.
// Memory: the output accumulator [kBq, D] and one [kBq, kBk] tile per thread, the transposed K
// (same size as K), bias tables O(H·(S+T)) — never a T×S matrix.
//
// The backward is in attention_cpu_backward.cpp; what both share in attention_cpu_common.h.
#include "ops/attention_cpu_common.h"
#include "ops/attention_skip.h"

namespace stretch::ops {
namespace {

using namespace attn_cpu;

struct FwdScratch {
  float* s;  // [kBq, kBk] scores, then probabilities
  float* o;  // [kBq, D] output accumulator
  float* m;  // [kBq] running max
  float* l;  // [kBq] running sum
  float* z;  // [kBk] dropout factors of one row
  float* qc;    // [kBq, D] q + u (relative-key term with u)
  float* qr;    // [kBq, D] q + w (relative-key term with w)
  float* band;  // [kBq, band_ld] (q + w)·R over the distances of the query tile's key tiles
  float* qn;    // [kBq] |q_r| (negligible key tiles, attention_skip.h)
  int64_t visited = 0, skipped = 0;  // (query tile, key tile) pairs of this thread
  uint16_t* qb = nullptr;  // bf16 path: [kBq, dp2] the query tile in bf16
  uint16_t* pb = nullptr;  // bf16 path: [kBq, kBk] P∘Z in bf16 (columns ≥ nk zero)
};

// Bf: the bf16 path (Q·Kᵀ and P·V as bf16 tile products from bp; everything else as in fp32).
template <class Eval, bool Bf>
void forward_query_tile(const Geo& g, const BiasSetup& bs, const RelKeySetup& rs, const SpanMaskSetup& sm,
                        const uint8_t* pad_tile, const float* kn, bool trim, int64_t bh, int64_t qt, float* out,
                        float* lse,
                        const float* q, const float* kt_pack, const float* v, const float* v_pack, const Bf16Packs& bp,
                        FwdScratch& w) {
  const int64_t b = bh / g.H, h = bh % g.H, D = g.D;
  const int64_t i0 = qt * kBq;
  const int mq = static_cast<int>(std::min<int64_t>(kBq, g.T - i0));
  const int64_t p0 = g.off + i0, p1 = p0 + mq - 1;
  const int64_t j_lo = row_keys(g, p0).lo, j_hi = row_keys(g, p1).hi;
  const int64_t ldq = g.qs.row, ldk = g.ks.row;
  const float* Q = q + g.q_at(bh) + i0 * ldq;
  const float* Kt = kt_pack + bh * D * g.s_pad;  // [n_kt, D, kBk]
  // V's rows: packed per (b, h) when the layout interleaves them (pack_rows), else in place.
  const float* V = v_pack ? v_pack + bh * g.S * D : v + g.k_at(bh);
  const int64_t ldv = v_pack ? D : ldk;
  const Eval ev(bs, h);
  // Relative-key term: (q + u) meets the keys, (q + w) meets R.
  const float* Qc = Q;
  const float* Qr = Q;
  int64_t ldqc = ldq, ldqr = ldq;
  if (rs.has_u) add_row_bias(w.qc, Q, ldq, mq, D, rs.u + h * D), Qc = w.qc, ldqc = D;
  if (rs.has_w) add_row_bias(w.qr, Q, ldq, mq, D, rs.w + h * D), Qr = w.qr, ldqr = D;

#if STRETCH_ATTN_BF16
  if constexpr (Bf) attn::to_bf16_rows(w.qb, bp.dp2, Q, ldq, mq, static_cast<int>(D));
#endif
  std::fill(w.o, w.o + mq * D, 0.f);
  std::fill(w.m, w.m + mq, kNegInf);
  std::fill(w.l, w.l + mq, 0.f);
  // kn (non-null when this call may skip): max |k| per key tile; the rows' |q| for the test.
  if (kn != nullptr) row_norms(w.qn, Q, ldq, mq, D);
  // AVX-512 and AVX2 + FMA (attention_exp.h, exp2_row_lazy): bias, mask, lazy maximum and exp in one pass over
  // registers, the mask as the row's visible run; the relative-key band joins the bias there (a
  // reversed load of the row's run). Key padding (not a run) and the span mask (a pass of its own)
  // finish the scores first, then take the same exp pass.
  const bool fused = kLog2Units && !sm.on && g.pad == nullptr;
  // The key tiles visited, kt_last down to kt_first; the relative-key band of all of them in one
  // product (keys kt_first·kBk .. j_end − 1).
  const int64_t kt_first = j_lo / kBk, kt_last = (j_hi - 1) / kBk, j_end = (kt_last + 1) * kBk;
  const int64_t ld_band = attn::band_ld(kBq, g.s_pad);
  if (rs.on && kt_last >= kt_first)
    attn::relkey_band(rs, h, mq, j_end - kt_first * kBk, Qr, ldqr, p0 - j_end + 1, w.band, ld_band);
  [[maybe_unused]] const float scale2 = g.scale * kLog2e;
  constexpr float lazy = kLog2Units ? kLazy * kLog2e : kLazy;
  // Key tiles from the diagonal backwards: with a distance penalty (ALiBi, windows) the row
  // maximum is usually met in the first tile, so later tiles rarely rescale the accumulator.
  for (int64_t kt = kt_last; kt >= kt_first; --kt) {
    const int64_t j0 = kt * kBk;
    const int nk = static_cast<int>(std::min<int64_t>(kBk, g.S - j0));
    if (kn != nullptr && kt != kt_last &&
        tile_negligible(ev, w.qn, w.m, kLog2Units, mq, p0, j0, nk, kn[bh * g.n_kt + kt], g.scale)) {
      ++w.skipped;
      continue;
    }
    ++w.visited;
    const bool masked = !tile_all_visible(g, p0, p1, j0, nk, pad_tile[b * g.n_kt + kt] != 0);
    // S's columns and P·V's keys per block of rows (attention_skip.h; the whole tile unless masked):
    // the scores past a block's end stay unwritten and are masked below (never read as scores).
    const BlockKeys ends = block_key_ends(g, p0, j0, nk, mq, trim && masked);
    // bf16: rows by 16 on the AMX tiles (rows_key_end), by block with vdpbf16ps.
    const int step = Bf ? bf16_product_rows(bp) : kTrimRows;
    for (int i = 0; i < mq; i += step) {
      const int rows = std::min(step, mq - i), end = rows_key_end(ends, i, rows);
      if (end == 0) continue;
#if STRETCH_ATTN_BF16
      if constexpr (Bf)
        bf16_product<Init::Zero>(bp, rows, bf16_key_columns(bp, end), static_cast<int>(bp.dp2 / 2),
                                 w.qb + i * bp.dp2, bp.dp2, bp.kd + (bh * g.n_kt + kt) * bp.d_tile(), kBk,
                                 w.s + i * kBk, kBk);
      else
#endif
        tile_gemm<Init::Zero, ALayout::Rows>(rows, fp32_columns(end), static_cast<int>(D), Qc + i * ldqc, ldqc,
                                             Kt + kt * D * kBk, kBk, w.s + i * kBk, kBk);
    }
    for (int r = 0; r < mq; ++r) {
      float* s = w.s + r * kBk;
      const int64_t pos = p0 + r;
      // Lazy rescaling: the reference point m only moves when the tile's maximum exceeds it
      // by more than kLazy, so exp(s − m) ≤ e^kLazy and l stays far from float overflow.
      const float m_old = w.m[r];
      float m_new, sum;
      if (!fused) {
        if (rs.on) attn::relkey_add_row(s, nk, w.band + r * ld_band, r, j_end - j0);
        ev(s, nk, static_cast<int32_t>(j0 - pos), g.scale);
        if (sm.on && !sm.after) add_reversed(s, nk, sm.m_at(h, pos - j0));
        if (masked) mask_row(s, nk, g, b, pos, j0);
      }
#if STRETCH_ATTN_LOG2
      if (fused) {
        int lo = 0, hi = nk;
        if (masked) {
          const KeyRange kr = row_keys(g, pos);
          lo = static_cast<int>(std::clamp<int64_t>(kr.lo - j0, 0, nk));
          hi = static_cast<int>(std::clamp<int64_t>(kr.hi - j0, lo, nk));
        }
        const auto bias2 = ev.bias2(static_cast<int32_t>(j0 - pos), kLog2e);
        if (rs.on) {  // + scale·log2 e · band entry of key jj (at brow[−jj]), reversed in registers
          const float* brow = w.band + r * ld_band + r + (j_end - j0) - 1;
          const attn::Lanes vs2 = attn::lanes_set1(scale2);
          const auto with_band = [&](int q, attn::LaneMask in) {  // keys kRowLanes·q + kRowLanes − 1 .. kRowLanes·q
            const attn::Lanes band = attn::lanes_load_reversed(brow - attn::kRowLanes * (q + 1) + 1);
            return attn::lanes_fmadd(band, vs2, bias2(q, in));
          };
          sum = attn::exp2_row_lazy(s, nk, lo, hi, scale2, with_band, m_old, lazy, &m_new);
        } else {
          sum = attn::exp2_row_lazy(s, nk, lo, hi, scale2, bias2, m_old, lazy, &m_new);
        }
      } else {
        const auto no_bias = [](int, attn::LaneMask) { return attn::lanes_zero(); };
        sum = attn::exp2_row_lazy(s, nk, 0, nk, kLog2e, no_bias, m_old, lazy, &m_new);
      }
#else
      sum = attn::exp_row_lazy(s, nk, m_old, lazy, &m_new);
#endif
      if (m_new == kNegInf) continue;  // nothing visible in this row yet (s zeroed)
      const float alpha = m_new == m_old ? 1.f
                          : m_old == kNegInf ? 0.f
                          : kLog2Units ? std::exp2(m_old - m_new)
                                       : std::exp(m_old - m_new);
      w.l[r] = w.l[r] * alpha + sum;
      w.m[r] = m_new;
      if (alpha != 1.f) {
        float* o = w.o + r * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) o[d] *= alpha;
      }
      if (sm.on && sm.after) mul_reversed(s, nk, sm.m_at(h, pos - j0));  // after the normaliser
      if (g.dropout.p > 0.f) {
        dropout_row(w.z, nk, g, bh, i0 + r, j0);
#pragma omp simd
        for (int jj = 0; jj < nk; ++jj) s[jj] *= w.z[jj];
      }
    }
#if STRETCH_ATTN_BF16
    if constexpr (Bf) attn::to_bf16_rows(w.pb, kBk, w.s, kBk, mq, nk);
#endif
    for (int i = 0; i < mq; i += step) {
      const int rows = std::min(step, mq - i), end = rows_key_end(ends, i, rows);
      if (end == 0) continue;
#if STRETCH_ATTN_BF16
      if constexpr (Bf)
        bf16_product<Init::Accumulate>(bp, rows, static_cast<int>(D), bf16_key_pairs(bp, end), w.pb + i * kBk, kBk,
                                       bp.vj + (bh * g.n_kt + kt) * bp.j_tile(), bp.ldn, w.o + i * D, D);
      else
#endif
        tile_gemm<Init::Accumulate, ALayout::Rows>(rows, static_cast<int>(D), end, w.s + i * kBk, kBk, V + j0 * ldv,
                                                   ldv, w.o + i * D, D);
    }
  }
  for (int r = 0; r < mq; ++r) {
    float* o = out + g.o_at(bh) + (i0 + r) * g.os.row;
    const float* acc = w.o + r * D;
    if (w.l[r] > 0.f) {
      const float inv = 1.f / w.l[r];
      for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * inv;
      lse[bh * g.T + i0 + r] = kLog2Units ? static_cast<float>(w.m[r] * kLn2 + std::log(static_cast<double>(w.l[r])))
                                          : w.m[r] + std::log(w.l[r]);
    } else {  // no visible key
      std::fill(o, o + D, 0.f);
      lse[bh * g.T + i0 + r] = kNegInf;
    }
  }
}

template <class Eval, bool Bf>
void forward_run(const Geo& g, const BiasSetup& bs, const RelKeySetup& rs, const SpanMaskSetup& sm, float* out,
                 float* lse, const float* q, const float* k, const float* v) {
  const int64_t BH = g.B * g.H, D = g.D;
  PoolArray<float> kt_pack(Bf ? 0 : static_cast<size_t>(BH * D * g.s_pad));
  if (!Bf) pack_transposed(kt_pack.data(), k, g);
  // V's rows made contiguous per (b, h) when they are interleaved in a fused projection's layout
  // and the call is long enough to pay for the copy (pack_rows; forward at S 1024 / 2048 / 4096:
  // 3.6% / 6.6% / 14% faster on one Zen 4 core, no gain at S ≤ 512).
  const bool pack_v = !Bf && g.ks.row != D && g.S >= kPackVMinKeys;
  PoolArray<float> v_pack(pack_v ? static_cast<size_t>(BH * g.S * D) : 0);
  if (pack_v) pack_rows(v_pack.data(), v, g);
  Bf16Packs bp;
#if STRETCH_ATTN_BF16
  const Bf16PackStore store(g, Bf ? k : nullptr, nullptr, nullptr, Bf ? v : nullptr);
  bp = store.p;
  const size_t per16 = Bf ? static_cast<size_t>(kBq * bp.dp2 + kBq * kBk) : 0;
#else
  const size_t per16 = 0;
#endif
  PoolArray<uint8_t> pad_tile(static_cast<size_t>(g.B * g.n_kt));
  padded_tiles(pad_tile.data(), g);
  const bool skip = skipping_applies<Eval>(rs, sm);
  PoolArray<float> kn(skip ? static_cast<size_t>(BH * g.n_kt) : 0);
  if (skip) key_tile_norms(kn.data(), k, g);
  const bool trim = trimming_applies(rs, sm);

  const int nthr = omp_get_max_threads();
  const size_t rel = rs.on ? static_cast<size_t>(2 * kBq * D + kBq * attn::band_ld(kBq, g.s_pad)) : 0;
  const size_t per = static_cast<size_t>(kBq * kBk + kBq * D + 3 * kBq + kBk) + rel;
  PoolArray<float> scratch(per * nthr);
  PoolArray<uint16_t> scratch16(per16 * nthr);
  const int64_t n_work = BH * g.n_qt;
#pragma omp parallel num_threads(nthr)
  {
    float* base = scratch.data() + per * omp_get_thread_num();
    float* rel_base = base + kBq * kBk + kBq * D + 3 * kBq + kBk;
    FwdScratch w{base,
                 base + kBq * kBk,
                 base + kBq * kBk + kBq * D,
                 base + kBq * kBk + kBq * D + kBq,
                 base + kBq * kBk + kBq * D + 2 * kBq,
                 rel_base,
                 rel_base + kBq * D,
                 rel_base + 2 * kBq * D,
                 base + kBq * kBk + kBq * D + 2 * kBq + kBk};
    if (Bf) {
      w.qb = scratch16.data() + per16 * omp_get_thread_num();
      w.pb = w.qb + kBq * bp.dp2;
    }
#if STRETCH_ATTN_AMX
    const attn::AmxTiles tiles(Bf && bp.amx);  // this thread's tiles, for its query tiles' products
#endif
    // Largest causal query tiles (the last ones) first, for dynamic load balance.
#pragma omp for schedule(dynamic, 1)
    for (int64_t wi = 0; wi < n_work; ++wi) {
      const int64_t qt = g.n_qt - 1 - wi / BH, bh = wi % BH;
      forward_query_tile<Eval, Bf>(g, bs, rs, sm, pad_tile.data(), skip ? kn.data() : nullptr, trim, bh, qt, out,
                                   lse, q, kt_pack.data(), v, pack_v ? v_pack.data() : nullptr, bp, w);
    }
    count_tiles(w.visited, w.skipped);
  }
}

}  // namespace

bool attention_bf16_supported() {
#if STRETCH_ATTN_BF16
  static const bool ok = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
#else
  return false;
#endif
}

bool attention_bf16_amx() {
#if STRETCH_ATTN_AMX
  return attention_bf16_supported() && attn::amx_tiles_usable();
#else
  return false;
#endif
}

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionParams& p) {
  const Geo g = make_geo(p);
  const BiasSetup bs = attn::bias_setup(p, false);
  const RelKeySetup rs = attn::relkey_setup(p, nullptr);
  const SpanMaskSetup sm = attn::span_mask_setup(p, nullptr);
  with_precision(use_bf16(rs, sm), [&](auto bf) {
    constexpr bool Bf = decltype(bf)::value;
    switch (bs.eval) {
      case BiasEval::None: return forward_run<attn::EvalNone, Bf>(g, bs, rs, sm, out, lse, q, k, v);
      case BiasEval::Linear: return forward_run<attn::EvalLinear, Bf>(g, bs, rs, sm, out, lse, q, k, v);
      case BiasEval::SymLinear: return forward_run<attn::EvalSymLinear, Bf>(g, bs, rs, sm, out, lse, q, k, v);
      case BiasEval::AlibiShaped: return forward_run<attn::EvalAlibiShaped, Bf>(g, bs, rs, sm, out, lse, q, k, v);
      case BiasEval::Table: return forward_run<attn::EvalTable, Bf>(g, bs, rs, sm, out, lse, q, k, v);
    }
  });
}
}  // namespace stretch::ops
