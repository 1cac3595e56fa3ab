// ops/attention_bias.h — internal to the fused kernel (attention_cpu*.cpp): the score-bias policies as the fused
// kernel sees them. Every policy is a function of (head h, rel = j − p_i) only, so the kernel
// asks a per-head evaluator for a contiguous run of keys: `ev(s, n, rel0, scale)` turns raw
// dot products s[0..n) of one query row into scores scale·s[jj] + bias_h(rel0 + jj).
// Evaluators are templates, so BiasEval::None costs nothing and linear ALiBi is one FMA;
// the other ALiBi shapes (log, clipped) read f(dist(rel)) from one table over rel shared by
// all heads (O(S+T) floats, built once per call) and are one load + one FMA, like linear;
// T5 reads a per-head table over rel (O(H·(S+T)) floats, never a T×S matrix).
// Learnable parameters: for each (b, h) the kernel hands every row of ∂L/∂score to the
// evaluator's grad(): every ALiBi shape keeps one moment Σ ∂L/∂score·f (linear: f = rel or
// |rel|, computed; log/clipped: f from the shared table), T5 accumulates
// g_h[rel] = Σ_{(i,j): j−p_i=rel} ∂L/∂score_ij; bias_reduce_grad turns that into ∂L/∂θ for
// the policy's per-head parameters θ (the slope; the T5 table column).
// Negligible key tiles (attention_skip.h): bias_upper(lo, hi) is an upper bound of bias_h(rel)
// over lo ≤ rel ≤ hi; kBounded marks the policies whose bound falls with distance (linear ALiBi,
// causal or symmetric), the only ones the kernel asks.
// A later policy with its own per-head parameter (Adaptive Span's z_h) adds an evaluator with
// a grad() and a reduce rule here.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_lanes.h"

namespace stretch::ops::attn {

// The forward's log2-unit pass (attention_exp.h, exp2_row_lazy; STRETCH_ATTN_LOG2 builds) asks each
// evaluator for bias2(rel0, c): a function (q, k) → c·bias_h(rel0 + kRowLanes·q + lane) for the
// kRowLanes lanes of vector q (k: the lanes inside the row; table loads are masked by it).

enum class BiasEval : uint8_t { None, Linear, SymLinear, AlibiShaped, Table };

struct BiasSetup {
  BiasEval eval = BiasEval::None;
  std::vector<float> slope_eff;   // [H] slopes·slope_scale (every ALiBi evaluator)
  std::vector<float> shape_f;     // [rel_n] f(dist(rel_lo + x)), the shape before −m'_h (AlibiShaped)
  std::vector<float> table;       // [H, rel_n] bias_h(rel_lo + x) (Table: T5)
  int32_t rel_lo = 0;             // smallest rel the kernel evaluates: −(S − 1)
  int32_t rel_n = 0;              // rels −(S−1) .. T−1 (T−1 reached only by masked entries)
  int n_params = 0;               // learnable parameters per head with a gradient requested
};

// Gradient state of one (b, h) while the kernel runs. Table policies spread consecutive rows
// over kGradLanes copies of g: row r+1's run of offsets is row r's shifted by one, and adding
// it into the same buffer right away would stall on store-to-load forwarding.
inline constexpr int kGradLanes = 4;
struct BiasGrad {
  double moment = 0.0;  // ALiBi: Σ ∂L/∂score · rel (Linear), · |rel| (SymLinear), · f (AlibiShaped)
  float* g = nullptr;   // Table: [kGradLanes, rel_n], zeroed per (b, h)
  int row = 0;          // rows seen, selects the lane of g
};

// Builds the evaluator data for p (already checked). `learn` asks for gradient reduction
// (true when the matching AttentionGrads pointer is non-null).
BiasSetup bias_setup(const AttentionParams& p, bool learn);
// Floats of g scratch one thread needs (0 unless a Table policy is learnable).
size_t bias_grad_floats(const BiasSetup& bs);
// Resets acc for a new (b, h); zeroes its g.
void bias_grad_reset(const BiasSetup& bs, BiasGrad& acc);
// dtheta [n_params] += ∂L/∂θ_h from the accumulated state of head h.
void bias_reduce_grad(const BiasSetup& bs, const AttentionParams& p, int64_t h, const BiasGrad& acc, double* dtheta);
// Adds the per-(b, h) partials [B·H, n_params] into the caller's gradient (fixed order over b).
void bias_scatter_grad(const BiasSetup& bs, const AttentionParams& p, const double* partial,
                       const AttentionGrads& extra);

struct EvalNone {
  EvalNone(const BiasSetup&, int64_t) {}
  void operator()(float* s, int n, int32_t, float scale) const {
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) s[jj] *= scale;
  }
  void grad(const float*, int, int32_t, BiasGrad&) const {}
  static constexpr bool kBounded = false;  // no distance penalty: no key tile is ever negligible
  float bias_upper(int32_t, int32_t) const { return 0.f; }
#if STRETCH_ATTN_LOG2
  auto bias2(int32_t, float) const {
    return [](int, LaneMask) { return lanes_zero(); };
  }
#endif
};

// −m·(p − j) = m·rel (causal: rel ≤ 0 for every visible key).
struct EvalLinear {
  float m;
  EvalLinear(const BiasSetup& bs, int64_t h) : m(bs.slope_eff[h]) {}
  void operator()(float* s, int n, int32_t rel0, float scale) const {
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) s[jj] = s[jj] * scale + m * static_cast<float>(rel0 + jj);
  }
  void grad(const float* ds, int n, int32_t rel0, BiasGrad& acc) const {
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int jj = 0; jj < n; ++jj) sum += ds[jj] * static_cast<float>(rel0 + jj);
    acc.moment += sum;
  }
  static constexpr bool kBounded = true;
  float bias_upper(int32_t lo, int32_t hi) const {
    return std::max(m * static_cast<float>(lo), m * static_cast<float>(hi));
  }
#if STRETCH_ATTN_LOG2
  auto bias2(int32_t rel0, float c) const {
    const Lanes mc = lanes_set1(m * c);
    return [=](int q, LaneMask) { return lanes_mul(mc, rel_lanes(rel0 + kRowLanes * q)); };
  }
#endif
};

// −m·|p − j|.
struct EvalSymLinear {
  float m;
  EvalSymLinear(const BiasSetup& bs, int64_t h) : m(bs.slope_eff[h]) {}
  void operator()(float* s, int n, int32_t rel0, float scale) const {
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) s[jj] = s[jj] * scale - m * std::fabs(static_cast<float>(rel0 + jj));
  }
  void grad(const float* ds, int n, int32_t rel0, BiasGrad& acc) const {
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int jj = 0; jj < n; ++jj) sum += ds[jj] * std::fabs(static_cast<float>(rel0 + jj));
    acc.moment += sum;
  }
  static constexpr bool kBounded = true;
  float bias_upper(int32_t lo, int32_t hi) const {
    const float near = lo <= 0 && hi >= 0 ? 0.f : std::min(std::fabs(float(lo)), std::fabs(float(hi)));
    const float far = std::max(std::fabs(float(lo)), std::fabs(float(hi)));
    return m >= 0.f ? -m * near : -m * far;
  }
#if STRETCH_ATTN_LOG2
  auto bias2(int32_t rel0, float c) const {
    const Lanes mc = lanes_set1(-m * c);
    return [=](int q, LaneMask) { return lanes_mul(mc, lanes_abs(rel_lanes(rel0 + kRowLanes * q))); };
  }
#endif
};

// −m'·f(dist) for ALiBi's log and clipped shapes (causal or symmetric: dist folded into f).
struct EvalAlibiShaped {
  float neg_m;
  const float* f_at_rel0;  // shape_f indexed by rel directly
  EvalAlibiShaped(const BiasSetup& bs, int64_t h)
      : neg_m(-bs.slope_eff[h]), f_at_rel0(bs.shape_f.data() - bs.rel_lo) {}
  void operator()(float* s, int n, int32_t rel0, float scale) const {
    const float* f = f_at_rel0 + rel0;
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) s[jj] = s[jj] * scale + neg_m * f[jj];
  }
  void grad(const float* ds, int n, int32_t rel0, BiasGrad& acc) const {
    const float* f = f_at_rel0 + rel0;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int jj = 0; jj < n; ++jj) sum += ds[jj] * f[jj];
    acc.moment += sum;
  }
  static constexpr bool kBounded = false;  // (a range maximum of the table: not worth it yet)
  float bias_upper(int32_t, int32_t) const { return std::numeric_limits<float>::infinity(); }
#if STRETCH_ATTN_LOG2
  auto bias2(int32_t rel0, float c) const {
    const Lanes mc = lanes_set1(neg_m * c);
    const float* f = f_at_rel0 + rel0;
    return [=](int q, LaneMask k) { return lanes_mul(mc, lanes_load(k, f + kRowLanes * q)); };
  }
#endif
};

struct EvalTable {
  const float* at_rel0;  // table row of head h, indexed by rel directly
  int32_t rel_lo, rel_n;
  EvalTable(const BiasSetup& bs, int64_t h)
      : at_rel0(bs.table.data() + h * bs.rel_n - bs.rel_lo), rel_lo(bs.rel_lo), rel_n(bs.rel_n) {}
  void operator()(float* s, int n, int32_t rel0, float scale) const {
    const float* t = at_rel0 + rel0;
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) s[jj] = s[jj] * scale + t[jj];
  }
  void grad(const float* ds, int n, int32_t rel0, BiasGrad& acc) const {
    float* g = acc.g + static_cast<size_t>(acc.row++ % kGradLanes) * rel_n + (rel0 - rel_lo);
#pragma omp simd
    for (int jj = 0; jj < n; ++jj) g[jj] += ds[jj];
  }
  static constexpr bool kBounded = false;
  float bias_upper(int32_t, int32_t) const { return std::numeric_limits<float>::infinity(); }
#if STRETCH_ATTN_LOG2
  auto bias2(int32_t rel0, float c) const {
    const Lanes vc = lanes_set1(c);
    const float* t = at_rel0 + rel0;
    return [=](int q, LaneMask k) { return lanes_mul(vc, lanes_load(k, t + kRowLanes * q)); };
  }
#endif
};

}  // namespace stretch::ops::attn
