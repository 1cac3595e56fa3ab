// ops/attention_cpu_common.h — internal to the fused CPU attention kernel (attention_cpu.cpp: the
// forward and the entry points of the forward; attention_cpu_backward.cpp: the backward and its
// schedules): tile sizes and constants, the per-call geometry, key ranges and masks, the transposed
// K / V packs, the bf16 packs and the precision dispatch that both directions share.
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_bias.h"
#include "ops/attention_exp.h"
#include "ops/attention_precision.h"
#include "ops/attention_relkey.h"
#include "ops/attention_span_mask.h"
#include "ops/attention_tile.h"
#include "ops/attention_tile_amx.h"
#include "ops/attention_tile_bf16.h"
#include "ops/gemm.h"
#include "tensor/pool.h"

namespace stretch::ops::attn_cpu {

using attn::ALayout;
using attn::BiasEval;
using attn::BiasSetup;
using attn::Init;
using attn::kRelPad;
using attn::RelKeySetup;
using attn::SpanMaskSetup;
using attn::tile_gemm;

constexpr int kBq = 64;  // query rows per tile
static_assert(kBq % attn::kLanes == 0, "the relative-key backward transposes G in kLanes-row blocks");
constexpr int kBk = 64;  // keys per tile (a multiple of attn::kNr)
static_assert(kBk % attn::kNr == 0, "key tiles must be whole micro-kernel blocks");
static_assert(kBk <= 64, "attn::exp2_row_lazy keeps a row of the tile in four registers");
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kLazy = 8.f;  // online softmax: tolerated growth of exp(s − m), e^8 ≈ 3e3
constexpr float kLog2e = 1.44269504088896341f;
constexpr double kLn2 = 0.693147180559945309;
// The forward's running max m is in log2 units where attn::exp2_row_lazy has a fast form
// (STRETCH_ATTN_LOG2: AVX-512, AVX2 + FMA), in natural units elsewhere (attn::exp_row_lazy); lse is
// natural in both.
constexpr bool kLog2Units = STRETCH_ATTN_LOG2 != 0;

// A buffer from the tensor pool (64-byte aligned, cached between calls).
template <class T>
class PoolArray {
 public:
  explicit PoolArray(size_t n) : n_(n), p_(static_cast<T*>(pool_alloc(std::max<size_t>(n, 1) * sizeof(T)))) {}
  ~PoolArray() { pool_free(p_, std::max<size_t>(n_, 1) * sizeof(T)); }
  PoolArray(const PoolArray&) = delete;
  PoolArray& operator=(const PoolArray&) = delete;
  T* data() { return p_; }
  T& operator[](size_t i) { return p_[i]; }

 private:
  size_t n_;
  T* p_;
};

struct Geo {
  int64_t B, H, T, S, D;
  int64_t off;           // S − T: key position of query 0
  int64_t s_pad;         // S rounded up to kBk
  int64_t n_qt, n_kt;    // query tiles, key tiles
  float scale;
  bool causal;
  int64_t W;             // window, 0 = unlimited
  int64_t md;            // min_distance (causal)
  const uint8_t* pad;    // [B, S] or null
  DropoutParams dropout;
  RowStrides qs, ks, os;  // row addressing of q/dq, k/v/dk/dv, out/dout (ops/attention.h)
  int64_t q_at(int64_t bh) const { return (bh / H) * qs.batch + (bh % H) * qs.head; }
  int64_t k_at(int64_t bh) const { return (bh / H) * ks.batch + (bh % H) * ks.head; }
  int64_t o_at(int64_t bh) const { return (bh / H) * os.batch + (bh % H) * os.head; }
};

inline Geo make_geo(const AttentionParams& p) {
  attention_check(p);
  Geo g{};
  g.B = p.b, g.H = p.h, g.T = p.t, g.S = p.s, g.D = p.d;
  g.off = p.s - p.t;
  g.n_qt = (p.t + kBq - 1) / kBq;
  g.n_kt = (p.s + kBk - 1) / kBk;
  g.s_pad = g.n_kt * kBk;
  g.scale = attention_scale(p);
  g.causal = p.mask == AttentionMask::Causal;
  g.W = attn::span_effective_window(p);  // p.window, narrowed by a renormalised span mask
  g.md = p.min_distance;
  g.pad = p.key_padding;
  g.dropout = p.dropout;
  g.qs = attention_rows_q(p);
  g.ks = attention_rows_kv(p);
  g.os = attention_rows_out(p);
  return g;
}

// Keys [lo, hi) visible to the query at key position pos, before key padding.
struct KeyRange {
  int64_t lo, hi;
};
inline KeyRange row_keys(const Geo& g, int64_t pos) {
  KeyRange r{0, g.S};
  if (g.causal) r.hi = pos + 1 - g.md;
  if (g.W > 0) {
    r.lo = std::max<int64_t>(0, pos - g.W + 1);
    if (!g.causal) r.hi = std::min(r.hi, pos + g.W);
  }
  return r;
}

// dst [B·H, n_kt, D, kBk] = src [B·H, S, D] (rows addressed by g.ks) transposed tile by tile (zero for keys ≥ S), so the
// Kᵀ block of one key tile is contiguous (a strided [D, S] layout would put the D rows of a
// tile S floats apart and alias them in L1). By kLanes × kLanes blocks in registers (an element
// loop was ~6% of a T 512 forward); the last D mod kLanes columns element by element.
inline void pack_transposed(float* dst, const float* src, const Geo& g) {
  const int64_t BH = g.B * g.H, S = g.S, D = g.D;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t kt = 0; kt < g.n_kt; ++kt) {
      const int64_t ld = g.ks.row;
      const float* s = src + g.k_at(bh) + kt * kBk * ld;
      float* d = dst + (bh * g.n_kt + kt) * D * kBk;
      const int64_t nk = std::min<int64_t>(kBk, S - kt * kBk);
      const int64_t dv = D / attn::kLanes * attn::kLanes;  // columns in whole blocks
      for (int64_t d0 = 0; d0 < dv; d0 += attn::kLanes)
        for (int64_t j0 = 0; j0 < kBk; j0 += attn::kLanes)
          attn::transpose_block(d + d0 * kBk + j0, kBk, s + j0 * ld + d0, ld,
                                static_cast<int>(std::clamp<int64_t>(nk - j0, 0, attn::kLanes)));
      for (int64_t dd = dv; dd < D; ++dd)
        for (int64_t j = 0; j < kBk; ++j) d[dd * kBk + j] = j < nk ? s[j * ld + dd] : 0.f;
    }
}

// dst [B·H, S, D] = src's rows (addressed by g.ks) made contiguous per (b, h): in a fused
// projection's layout (q, k, v or k, v blocks per row) consecutive rows of one head are 2·H·D or
// 3·H·D floats apart, a multiple of the L1's set stride, so a tile product streaming 64 of them
// keeps few sets busy and misses; packed, they fill every set.
inline constexpr int64_t kPackVMinKeys = 1024;  // the forward packs V from this many keys on
inline void pack_rows(float* dst, const float* src, const Geo& g) {
  const int64_t BH = g.B * g.H, S = g.S, D = g.D, ld = g.ks.row;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < BH; ++bh) {
    const float* s = src + g.k_at(bh);
    float* d = dst + bh * S * D;
    for (int64_t j = 0; j < S; ++j) std::copy_n(s + j * ld, D, d + j * D);
  }
}

// pad_tile [B, n_kt]: 1 when any key of the tile is padded.
inline void padded_tiles(uint8_t* pad_tile, const Geo& g) {
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t kt = 0; kt < g.n_kt; ++kt) {
      uint8_t any = 0;
      if (g.pad != nullptr)
        for (int64_t j = kt * kBk; j < std::min(g.S, (kt + 1) * kBk); ++j) any |= g.pad[b * g.S + j] != 0;
      pad_tile[b * g.n_kt + kt] = any;
    }
}

// True when every (row, key) of rows at positions [p0, p1] × keys [j0, j0+nk) is visible.
inline bool tile_all_visible(const Geo& g, int64_t p0, int64_t p1, int64_t j0, int64_t nk, bool padded) {
  if (padded) return false;
  return row_keys(g, p0).hi >= j0 + nk && row_keys(g, p1).lo <= j0;
}

// s[0..nk) = −inf where key j0+jj is invisible to the query at pos.
// The visible keys of a row are one run [lo, hi) of the tile, so this fills the two ends and
// reads the padding only inside the run (a per-key test of both bounds was ~1% of the forward).
inline void mask_row(float* s, int nk, const Geo& g, int64_t b, int64_t pos, int64_t j0) {
  const KeyRange kr = row_keys(g, pos);
  const int lo = static_cast<int>(std::clamp<int64_t>(kr.lo - j0, 0, nk));
  const int hi = static_cast<int>(std::clamp<int64_t>(kr.hi - j0, lo, nk));
  std::fill(s, s + lo, kNegInf);
  std::fill(s + hi, s + nk, kNegInf);
  if (g.pad == nullptr) return;
  const uint8_t* pad = g.pad + b * g.S + j0;
  for (int jj = lo; jj < hi; ++jj) s[jj] = pad[jj] == 0 ? s[jj] : kNegInf;
}

// Dropout factor Z for (b, h, i, j0 + jj), jj < nk: keep / (1 − p) or 0.
inline void dropout_row(float* z, int nk, const Geo& g, int64_t bh, int64_t i, int64_t j0) {
  dropout_factors(g.dropout, (bh * g.T + i) * g.S + j0, nk, z);
}

// The bf16 path's per-call operands (attention_tile_bf16.h layouts), per (b, h) and key tile:
// kd the pair-packed Kᵀ [dp2 / 2, kBk, 2] (B of S = Q·Kᵀ), vj the pair-packed V
// [kBk / 2, ldn, 2] (B of O += P·V); in the backward also vd (Vᵀ, B of dP = dO·Vᵀ) and kj (K, B
// of dQ += dS·K). dp2 = D rounded up to even, ldn = D rounded up to kNr.
// amx: the products run on the AMX tiles (attention_tile_amx.h), each thread's inside an AmxTiles.
struct Bf16Packs {
  int64_t dp2 = 0, ldn = 0;
  bool amx = false;
  const uint16_t* kd = nullptr;
  const uint16_t* vd = nullptr;
  const uint16_t* kj = nullptr;
  const uint16_t* vj = nullptr;
  int64_t d_tile() const { return dp2 * kBk; }   // elements per key tile of kd / vd
  int64_t j_tile() const { return kBk * ldn; }   // elements per key tile of kj / vj
};

// s[jj] += t[−jj] / s[jj] *= t[−jj]: a per-distance table read for keys j0 + jj of one row
// (t points at distance pos − j0).
inline void add_reversed(float* s, int nk, const float* t) {
  for (int jj = 0; jj < nk; ++jj) s[jj] += t[-jj];
}
inline void mul_reversed(float* s, int nk, const float* t) {
  for (int jj = 0; jj < nk; ++jj) s[jj] *= t[-jj];
}

// dst [n, D] = src rows (stride ld) + bias [D].
inline void add_row_bias(float* dst, const float* src, int64_t ld, int64_t n, int64_t D, const float* bias) {
  for (int64_t r = 0; r < n; ++r)
#pragma omp simd
    for (int64_t x = 0; x < D; ++x) dst[r * D + x] = src[r * ld + x] + bias[x];
}

#if STRETCH_ATTN_BF16
// The bf16 operands of one call: pair-packed Kᵀ / Vᵀ (over D) and K / V (over keys) per
// (b, h, key tile), each null where its pointer is null; converted once per call.
struct Bf16PackStore {
  Bf16Packs p;
  PoolArray<uint16_t> kd, vd, kj, vj;
  Bf16PackStore(const Geo& g, const float* kd_src, const float* vd_src, const float* kj_src, const float* vj_src)
      : p{(g.D + 1) / 2 * 2, (g.D + attn::kNr - 1) / attn::kNr * attn::kNr, attention_bf16_amx()},
        kd(kd_src ? size(g, p.d_tile()) : 0), vd(vd_src ? size(g, p.d_tile()) : 0),
        kj(kj_src ? size(g, p.j_tile()) : 0), vj(vj_src ? size(g, p.j_tile()) : 0) {
    const int64_t BH = g.B * g.H, ld = g.ks.row;
    const int D = static_cast<int>(g.D);
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < BH; ++bh)
      for (int64_t kt = 0; kt < g.n_kt; ++kt) {
        const int64_t at = g.k_at(bh) + kt * kBk * ld, t = bh * g.n_kt + kt;
        const int nk = static_cast<int>(std::min<int64_t>(kBk, g.S - kt * kBk));
        if (kd_src) attn::pack_transposed_pairs(kd.data() + t * p.d_tile(), kBk, kd_src + at, ld, nk, D);
        if (vd_src) attn::pack_transposed_pairs(vd.data() + t * p.d_tile(), kBk, vd_src + at, ld, nk, D);
        if (kj_src) pack_keys(kj.data() + t * p.j_tile(), kj_src + at, ld, nk, D);
        if (vj_src) pack_keys(vj.data() + t * p.j_tile(), vj_src + at, ld, nk, D);
      }
    p.kd = kd_src ? kd.data() : nullptr, p.vd = vd_src ? vd.data() : nullptr;
    p.kj = kj_src ? kj.data() : nullptr, p.vj = vj_src ? vj.data() : nullptr;
  }
  static size_t size(const Geo& g, int64_t per_tile) { return static_cast<size_t>(g.B * g.H * g.n_kt * per_tile); }
  // All kBk / 2 pairs of the tile written (keys ≥ nk zero), so a product over (nk + 1) / 2 pairs
  // never reads past the tile.
  void pack_keys(uint16_t* dst, const float* src, int64_t ld, int nk, int D) const {
    attn::pack_row_pairs(dst, p.ldn, src, ld, nk, D);
    const int done = (nk + 1) / 2;
    std::fill(dst + done * p.ldn * 2, dst + (kBk / 2) * p.ldn * 2, uint16_t{0});
  }
};
#endif

// The bf16 path runs for this call: bf16 matrix products requested (ops::matmul_precision()), run
// natively (ops::bf16_products() == Native; under Fp32Fma and NativeFp32Attention the attention is
// fp32, as without avx512_bf16),
// the CPU and the build have avx512_bf16, and no score term that has no bf16 form yet: the
// relative-key term (its band products with R read fp32 (q + w) and write dQ/dR in fp32) and the
// soft span mask run the whole call in fp32 (docs/architecture.md, "bf16 attention").
#if STRETCH_ATTN_BF16
// A bf16 tile product (attention_tile_bf16.h's contract) on the AMX tiles where bp.amx (the
// calling thread inside an AmxTiles), else with vdpbf16ps.
template <Init I>
inline void bf16_product(const Bf16Packs& bp, int m, int n, int k2, const uint16_t* a, int64_t lda, const uint16_t* b,
                         int64_t ldb, float* c, int64_t ldc) {
#if STRETCH_ATTN_AMX
  if (bp.amx) return attn::tile_gemm_amx<I>(m, n, k2, a, lda, b, ldb, c, ldc);
#endif
  attn::tile_gemm_bf16<I>(m, n, k2, a, lda, b, ldb, c, ldc);
}
#endif
// On the AMX tiles a product over a key tile takes whole tiles where the operands allow it: S's
// and dP's key columns rounded up to a 2-tile block (32; the packed Kᵀ and Vᵀ are zero past nk,
// and a row's scores past its end are masked anyway), P·V's and dS·K's key pairs to a tile's sum
// (16 pairs; P, dS and the packed V and K are exact zeros past the row's end). Both ≤ kBk.
inline int bf16_key_columns(const Bf16Packs& bp, int end) {
  return bp.amx ? std::min(kBk, (end + 31) / 32 * 32) : end;
}
inline int bf16_key_pairs(const Bf16Packs& bp, int end) {
  const int k2 = (end + 1) / 2;
  return bp.amx ? std::min(kBk / 2, (k2 + 15) / 16 * 16) : k2;
}
// Rows per bf16 product: an AMX tile's 16 (two blocks of trimming: attention_skip.h, rows_key_end),
// else a block's.
inline int bf16_product_rows(const Bf16Packs& bp) { return bp.amx ? 16 : attn::kMr; }

inline bool use_bf16(const RelKeySetup& rs, const SpanMaskSetup& sm) {
  return matmul_precision() == GemmPrecision::Bf16 && bf16_products() == Bf16Products::Native &&
         attention_bf16_supported() && !rs.on && !sm.on;
}

// fn(std::bool_constant<Bf>) with Bf = use_bf16(...) (false only where the kernel is not built).
template <class F>
inline void with_precision(bool bf, F&& fn) {
#if STRETCH_ATTN_BF16
  if (bf) return fn(std::true_type{});
#endif
  (void)bf;
  fn(std::false_type{});
}

inline bool wants_grad(const AttentionParams& p, const AttentionGrads& extra) {
  if (p.bias == BiasPolicy::Alibi || p.bias == BiasPolicy::AlibiSym) return extra.dslopes != nullptr;
  if (p.bias == BiasPolicy::T5) return extra.dt5_table != nullptr;
  return false;
}

}  // namespace stretch::ops::attn_cpu
