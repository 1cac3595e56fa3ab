// ops/attention.h — THE attention op of stretch (DESIGN.md §2): scaled dot-product attention
// with a typed score-bias policy, forward and backward, fused and tiled on the CPU so that no
// T×S score, probability or bias matrix is ever stored (memory O(T·D) per head).
//
// Contract
//   q [B, H, T, D] queries, k/v [B, H, S, D] keys/values, S >= T. Query i sits at key position
//   p_i = S − T + i (a cached prefix or memory of S − T keys may precede the queries).
//   Key j is VISIBLE to query i iff
//       j ≤ p_i                      (AttentionMask::Causal; Bidirectional: every j)
//     and dist(i, j) < W             (when window W > 0; dist = p_i − j causal, |p_i − j|
//                                     bidirectional: a symmetric local window)
//     and key_padding[b, j] == 0     (when key_padding is given)
//     and p_i − j ≥ min_distance     (causal; Adaptive Span: 1, the current token is never attended).
//   score(h, i, j) = scale · q_i·k_j + bias_h(i, j), for visible keys only:
//     BiasPolicy::None      0
//     BiasPolicy::Alibi     −m'_h · f(p_i − j)    causal only (the paper's −m(i−j) form)
//     BiasPolicy::AlibiSym  −m'_h · f(|p_i − j|)  either mask (bidirectional/encoder use)
//         m'_h = slopes[h] · slope_scale; f by AlibiShape: Linear f(x) = x,
//         Log f(x) = ln(1 + x), Clipped f(x) = min(x, cap).
//     BiasPolicy::T5        table[t5_bucket(j − p_i), h] (t5_bucket below; T5's unidirectional
//                           buckets when Causal, its bidirectional buckets when Bidirectional)
//   Relative-key term (RelKeyOptions, causal only; relkey.r null = off), with dist = p_i − j:
//     score(h, i, j) += scale · [u_h·k_j + (q_i + w_h)·R_h[row(dist)]],  row = min(dist, clamp) − dist0
//   i.e. Transformer-XL's scale·[(q_i + u)·k_j + (q_i + v)·R[dist]] (§6.1: AC + BD after _rel_shift;
//   u = r_w_bias, w = r_r_bias) and Adaptive Span's positional keys q_i·key_pe[dist] (§5.3: Shared,
//   u = w = null, dist0 = 1). R is indexed by distance, never by key: Transformer-XL's r_net(pos_emb)
//   has rows for positions klen−1 … 0, so its row j' is distance klen−1−j' — pass r = &R[klen−1],
//   row_stride = −H·D (no copy); span's key_pe [D, L] (column ℓ = distance L − ℓ) is r = &pe[L−1],
//   row_stride = −1, elem_stride = L, dist0 = 1. clamp > 0 is Transformer-XL's clamp_len (then R
//   needs only rows up to clamp). same_length is window = mem_len (§6.2: visible distances
//   0..mem_len−1, for every segment, warm-up included). Composes with every BiasPolicy.
//   Soft span mask (SpanMaskOptions, causal only): after the softmax (P·m, no renormalisation) or as
//   log m added to the score (renormalised); see SpanMaskOptions below.
//   P_ij = softmax_j(score)       lse_i = log Σ_j exp(score_ij)  (natural log, no dropout)
//   out_i = Σ_j P_ij · m_ij · Z_ij · v_j  (m_ij = m_h(dist) after the softmax, else 1),
//       Z_ij = keep(b,h,i,j) / (1 − p) with
//       keep = ops::dropout_keep(dropout, ((b·H + h)·T + i)·S + j)   (1 when dropout.p == 0)
//   so the dropout mask depends only on (seed, stream, b, h, i, j): identical for any tiling,
//   thread count, and in the reference.
//   A row with no visible key (all its keys padded) gives out = 0, lse = −inf, and zero
//   gradient — never NaN.
//
// Gradients ACCUMULATE (+=) into dq, dk, dv and into the learnable bias parameters of
// AttentionGrads (null pointer = not learnable, not computed): dslopes [H] is ∂L/∂slopes
// (the raw slopes, before slope_scale), dt5_table [NB, H] is ∂L/∂table, drel_r ∂L/∂R in R's own
// layout (clamped distances summed onto row clamp; Shared: summed over heads), drel_u/drel_w [H, D],
// dspan_z [span.heads] (∂m/∂z = L/R inside the ramp, at its ends by SpanMaskEdges, 0 beyond).
// The soft mask after the softmax keeps the backward's delta_i = dout_i·out_i: with dP_ij =
// m_ij Z_ij dout_i·v_j, Σ_j P_ij dP_ij = dout_i·Σ_j P_ij m_ij Z_ij v_j = dout_i·out_i.
// Backward needs the forward's out and lse; it recomputes the probabilities from lse.
//
// Policies are functions of (h, p_i − j) only; the fast kernel evaluates them inside its inner
// loop (a template per policy, so None costs nothing). The relative-key term is one band GEMM
// per (query tile, key tile) (ops/attention_relkey.h), the soft mask a per-(h, distance) table
// (ops/attention_span_mask.h).
//
// Limits: S < 2^24 (relative positions are exact float integers). attention_check() throws
// stretch::Error naming the field for any inconsistent parameter; both entry points call it.
//
// Implementations: attention_cpu.cpp + attention_cpu_backward.cpp (fast: 64×64 tiles, online
// softmax, causal tiles above the diagonal never visited, OpenMP over (b, h, query tile) forward
// and (b, h) backward; bitwise identical for any thread count; workspace from the tensor pool: a tile-major copy of K (and V
// in backward), B·H·S·D floats each, plus per-thread tiles), and ref:: in
// attention_reference.cpp (naive: materialises one [T, S] score and bias matrix at a time; a
// double-precision overload exists for float64 gradient checks; its backward ignores out/lse
// and recomputes the softmax).
#pragma once
#include <cstdint>

#include "ops/dropout.h"
#include "ops/grad_init.h"

namespace stretch::ops {

enum class AttentionMask : uint8_t { Causal, Bidirectional };
enum class BiasPolicy : uint8_t { None, Alibi, AlibiSym, T5 };
enum class AlibiShape : uint8_t { Linear, Log, Clipped };

struct AlibiOptions {
  const float* slopes = nullptr;  // [H] from alibi_slopes(H) (or a learnable copy of them)
  float slope_scale = 1.f;        // position interpolation: L_train / L_eval (arXiv:2310.13017)
  AlibiShape shape = AlibiShape::Linear;
  float cap = 0.f;                // AlibiShape::Clipped: distances beyond cap count as cap (> 0)
};

struct T5Options {
  const float* table = nullptr;   // [NB, H] learned bias per (bucket, head)
  int num_buckets = 32;           // NB
  int max_distance = 128;
};

// The relative-key term (Transformer-XL's terms (b)+(d), Adaptive Span's positional keys); see
// the contract above. R's element x of head h for the row holding distance dist0 + n is
//   r[n·row_stride + h·head_stride + x·elem_stride]
// (strides may be negative; all three zero = packed [rows, H, D] PerHead or [rows, D] Shared).
enum class RelKeyShare : uint8_t { PerHead, Shared };
struct RelKeyOptions {
  const float* r = nullptr;   // R (null: no relative-key term; u, w must then be null too)
  int64_t rows = 0;           // rows of R: distances dist0 .. dist0 + rows − 1
  int64_t dist0 = 0;          // distance held by R's first row (<= min_distance)
  RelKeyShare share = RelKeyShare::PerHead;  // Shared: one R for all heads (span's key_pe)
  int64_t row_stride = 0, head_stride = 0, elem_stride = 0;  // all zero: packed
  const float* u = nullptr;   // [H, D] global content bias (TXL r_w_bias) or null
  const float* w = nullptr;   // [H, D] global position bias (TXL r_r_bias) or null
  int64_t clamp = 0;          // > 0: distances beyond clamp use the row of distance clamp
};

// Adaptive Span's soft mask (REFERENCE.md §5.1) per head h and distance d:
//   m_h(d) = clamp((ramp + z_h·max_span − (d − 1)) / ramp, 0, 1)
// AfterSoftmax (the fairseq port, default): out_i = Σ_j P_ij·m_h(d_ij)·Z_ij·v_j, no renormalisation
//   (P, lse as without the mask: keys where m = 0 still count in the softmax's normaliser, as after
//   [FS]'s trim_memory; the caller's window, from get_trim_len, bounds the cost).
// LogBeforeSoftmax (the original, renormalised): score += log m_h(d); m = 0 makes the key invisible,
//   so such key tiles are never visited (the kernel narrows the window to where some m_h > 0).
enum class SpanMaskMode : uint8_t { AfterSoftmax, LogBeforeSoftmax };
// Where ∂m/∂z = L/R holds, with x = (R + z·L − (d − 1))/R: Open 0 < x < 1 (strictly inside the ramp);
// Closed 0 ≤ x ≤ 1, torch's clamp gradient, which passes at both ends (fairseq's port at z = 0, where
// x is exactly 1 at d = 1 and 0 at d = R + 1; the family uses it). With LogBeforeSoftmax the lower end
// (m = 0, an invisible key) stays open in both.
enum class SpanMaskEdges : uint8_t { Open, Closed };
struct SpanMaskOptions {
  const float* z = nullptr;  // [heads] current span fraction z (null: no soft mask)
  int64_t heads = 0;         // H (per-head spans) or 1 (one z for the layer, broadcast)
  float ramp = 32.f;         // R > 0
  int64_t max_span = 0;      // L >= 1
  SpanMaskMode mode = SpanMaskMode::AfterSoftmax;
  SpanMaskEdges edges = SpanMaskEdges::Open;
};
// m_h(d) and ∂m/∂z (max_span/ramp on the ramp, its ends by `edges`, else 0) for one z.
double span_mask_value(const SpanMaskOptions& o, double z, int64_t dist);
double span_mask_dz(const SpanMaskOptions& o, double z, int64_t dist);

// Memory layout of the [.., D] operands: row t of head h in batch b starts at element
//   b·batch + h·head + t·row
// of the operand's pointer, its D values contiguous. All zero means packed [B, H, T, D] (row = D,
// head = T·D, batch = H·T·D; S instead of T for k and v). The fused QKV projection's output
// [B, T, 3·H·D] is read in place with row = 3·H·D, head = D, batch = T·3·H·D (k and v pointers at
// +H·D and +2·H·D), and the output written as [B, T, H·D] (row = H·D, head = D, batch = T·H·D),
// so no head split/merge copies are needed. lse is always packed [B, H, T].
struct RowStrides {
  int64_t batch = 0, head = 0, row = 0;
};
struct AttentionLayout {
  RowStrides q;    // q and dq
  RowStrides kv;   // k, v, dk and dv
  RowStrides out;  // out and dout
};

struct AttentionParams {
  int64_t b = 0, h = 0, t = 0, s = 0, d = 0;  // B, H, T (queries), S (keys, S >= T), D
  float scale = 0.f;                          // 0 means 1/sqrt(D)
  AttentionMask mask = AttentionMask::Causal;
  BiasPolicy bias = BiasPolicy::None;
  AlibiOptions alibi{};                       // used when bias is Alibi or AlibiSym
  T5Options t5{};                             // used when bias is T5
  int64_t window = 0;                         // W: 0 = unlimited; composes with every policy
  int64_t min_distance = 0;                   // causal only: keys nearer than this are invisible
  RelKeyOptions relkey{};                     // relative-key term (causal only); r null = off
  SpanMaskOptions span{};                     // soft span mask (causal only); z null = off
  const uint8_t* key_padding = nullptr;       // [B, S] 1 = padded key (invisible); optional
  DropoutParams dropout{};                    // attention dropout on P (p = 0 at evaluation)
  AttentionLayout layout{};                   // all zero: packed [B, H, T, D] operands
};

// The strides actually used: packed defaults filled in for an all-zero RowStrides.
RowStrides attention_rows_q(const AttentionParams& p);
RowStrides attention_rows_kv(const AttentionParams& p);
RowStrides attention_rows_out(const AttentionParams& p);
// relkey.r's strides actually used (packed defaults filled in; head = 0 when Shared).
struct RelKeyStrides {
  int64_t row = 0, head = 0, elem = 0;
};
RelKeyStrides attention_relkey_strides(const AttentionParams& p);
// Row of relkey.r used for a visible key at distance dist ≥ min_distance: min(dist, clamp) − dist0
// (may be ≥ rows only for distances no key is visible at; attention_check guarantees that).
int64_t attention_relkey_row(const AttentionParams& p, int64_t dist);

struct AttentionGrads {
  float* dslopes = nullptr;    // [H] += ∂L/∂slopes (Alibi/AlibiSym); null: slopes fixed
  float* dt5_table = nullptr;  // [NB, H] += ∂L/∂table (T5); null: table fixed
  float* drel_r = nullptr;     // += ∂L/∂R, laid out as relkey.r (same rows and strides); null: R fixed
  float* drel_u = nullptr;     // [H, D] += ∂L/∂u; null (or relkey.u null): not computed
  float* drel_w = nullptr;     // [H, D] += ∂L/∂w; null (or relkey.w null): not computed
  float* dspan_z = nullptr;    // [span.heads] += ∂L/∂z; null: not computed
};

// Throws stretch::Error (usage) naming the offending field when p is inconsistent.
void attention_check(const AttentionParams& p);
// 1/sqrt(D) when p.scale == 0, else p.scale.
float attention_scale(const AttentionParams& p);

// T5's relative-position bucket (Raffel et al. 2020, mesh_tensorflow/t5 _relative_position_bucket)
// for rel = j − p_i. Unidirectional: n = max(−rel, 0); exact buckets below NB/2, then
// logarithmic buckets up to max_distance, clamped to NB − 1. Bidirectional: NB halves, keys
// after the query (rel > 0) use the upper half, n = |rel|. The logarithm is float32, as in T5.
int t5_bucket(int64_t rel, int num_buckets, int max_distance, AttentionMask mask);

// out [B, H, T, D], lse [B, H, T]; q [B, H, T, D], k/v [B, H, S, D].
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionParams& p);
// dq [B, H, T, D] +=, dk/dv [B, H, S, D] +=, extra (see AttentionGrads) +=;
// dout/out [B, H, T, D], lse [B, H, T] from attention_forward with the same p.
// init = Overwrite: dq, dk, dv are written (=), every element (the bias gradients still +=).
void attention_backward(float* dq, float* dk, float* dv, const AttentionGrads& extra,
                        const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, const AttentionParams& p,
                        GradInit init = GradInit::Accumulate);

// The backward's schedule (docs/architecture.md, "Attention backward schedules"). Auto (the
// default): one task per (b, h), or key-tile and query-tile tasks where attention_backward_splits
// says so; Head and Split force one (Split only where the call allows it, see below). All give
// bitwise the same gradients; tests and bench_attention compare them. Process-wide.
enum class BackwardSchedule : uint8_t { Auto, Head, Split };
void set_attention_backward_schedule(BackwardSchedule s);
BackwardSchedule attention_backward_schedule();
// Whether attention_backward under Auto with `threads` threads splits: one task per (b, h) would
// leave threads idle, 7·B·H < 5·threads·⌈B·H / threads⌉ (the split recomputes P and dS: ~7/5 of
// the tile products), and nothing is summed per head over all its tiles (a learnable bias, i.e.
// extra's slope or table gradient; the relative-key term; a learnable span).
bool attention_backward_splits(const AttentionParams& p, int threads, const AttentionGrads& extra = {});

// Key tiles whose probabilities all flush to zero (docs/architecture.md, "Negligible key tiles";
// ops/attention_skip.h): with a distance penalty (linear ALiBi) the kernel bounds a tile's scores
// from the norms of q and k and skips it (On, the default) or visits it anyway (Off); and on a
// masked (causal, windowed) tile it computes each block of 8 query rows only up to the block's
// last visible key (On; whole tiles with Off, any policy). Bitwise the same results either way.
// Process-wide; tests and benches compare the two. The counts are
// (query tile, key tile) pairs visited and skipped by both directions, summed over calls since the
// last reset (relaxed atomics, one update per call).
enum class TileSkipping : uint8_t { On, Off };
void set_attention_tile_skipping(TileSkipping s);
TileSkipping attention_tile_skipping();
struct AttentionTileCounts {
  int64_t visited = 0, skipped = 0;
};
AttentionTileCounts attention_tile_counts(bool reset = false);

namespace ref {
// The oracle: naive loops over an explicit [T, S] score matrix and [T, S] bias matrix per
// (b, h); the relative-key term as the source codebases write it (Transformer-XL's q·Rᵀ then
// _rel_shift when distance 0 is visible, else Adaptive Span's _unskew/_skew), the soft mask from
// §5.1's template; its backward uses the explicit per-(i, j) formulas instead. Masked
// softmax, plain matrix products. Same contract as above.
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionParams& p);
void attention_backward(float* dq, float* dk, float* dv, const AttentionGrads& extra,
                        const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, const AttentionParams& p);

// float64 evaluation for finite-difference checks: everything in double, the bias parameters
// (slopes, table) read from p as float. dslopes [H] / dt5_table [NB, H] are double here.
struct AttentionGradsF64 {
  double* dslopes = nullptr;    // [H] +=
  double* dt5_table = nullptr;  // [NB, H] +=
  double* drel_r = nullptr;     // += laid out as relkey.r
  double* drel_u = nullptr;     // [H, D] +=
  double* drel_w = nullptr;     // [H, D] +=
  double* dspan_z = nullptr;    // [span.heads] +=
};
// Double copies of the relative-key and span parameters (same layout as p's); a null field reads
// p's float pointer instead. They replace values only: a term p leaves off (null) stays off.
struct RelKeyF64 {
  const double* r = nullptr;
  const double* u = nullptr;
  const double* w = nullptr;
  const double* span_z = nullptr;  // [span.heads] (null: p.span.z's floats)
};
void attention_forward(double* out, double* lse, const double* q, const double* k, const double* v,
                       const AttentionParams& p, const RelKeyF64& rel = {});
void attention_backward(double* dq, double* dk, double* dv, const AttentionGradsF64& extra,
                        const double* dout, const double* q, const double* k, const double* v,
                        const double* out, const double* lse, const AttentionParams& p,
                        const RelKeyF64& rel = {});
}  // namespace ref

}  // namespace stretch::ops
