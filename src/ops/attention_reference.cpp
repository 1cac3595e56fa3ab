// ops/attention_reference.cpp — ref::attention_forward / ref::attention_backward: the oracle
// for the fused kernel, kept forever (contract in ops/attention.h).
// Naive on purpose: for one (b, h) at a time it materialises the [T, S] bias matrix, the
// [T, S] score matrix and the probabilities, computes everything in double (the float entry
// points round the double result once), and writes the visibility rule and every bias formula
// out directly per (i, j), sharing nothing with attention_cpu.cpp except t5_bucket() and
// dropout_keep(). Backward ignores the saved out and lse and recomputes the softmax, and takes
// delta_i = Σ_j P_ij dP_ij from its definition (not from dout·out).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "ops/attention.h"

namespace stretch::ops::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Problem {
  const AttentionParams& p;
  int64_t B, H, T, S, D;
  double scale;
  bool causal;
  RowStrides qs, ks, os;  // element of row t of (b, h): b·batch + h·head + t·row (ops/attention.h)
  RelKeyF64 rel;          // double relative-key parameters (null fields: p.relkey's floats)
  RelKeyStrides rs;       // relkey.r's strides
  bool relkey() const { return p.relkey.r != nullptr; }
  // R's element x for head h at row n (0 outside R's rows: such distances are never visible).
  double r_at(int64_t h, int64_t n, int64_t x) const {
    if (n < 0 || n >= p.relkey.rows) return 0.0;
    const int64_t at = n * rs.row + h * rs.head + x * rs.elem;
    return rel.r != nullptr ? rel.r[at] : static_cast<double>(p.relkey.r[at]);
  }
  // u, w: 0 without the relative-key term or when p.relkey's pointer is null (rel only replaces
  // the values of a bias the params enable).
  double u_at(int64_t h, int64_t x) const {
    if (!relkey() || p.relkey.u == nullptr) return 0.0;
    return rel.u != nullptr ? rel.u[h * D + x] : static_cast<double>(p.relkey.u[h * D + x]);
  }
  bool span() const { return p.span.z != nullptr; }
  bool span_after() const { return span() && p.span.mode == SpanMaskMode::AfterSoftmax; }
  double z_at(int64_t h) const {
    const int64_t at = p.span.heads == 1 ? 0 : h;
    return rel.span_z != nullptr ? rel.span_z[at] : static_cast<double>(p.span.z[at]);
  }
  double w_at(int64_t h, int64_t x) const {
    if (!relkey() || p.relkey.w == nullptr) return 0.0;
    return rel.w != nullptr ? rel.w[h * D + x] : static_cast<double>(p.relkey.w[h * D + x]);
  }
  int64_t q_at(int64_t b, int64_t h) const { return b * qs.batch + h * qs.head; }
  int64_t k_at(int64_t b, int64_t h) const { return b * ks.batch + h * ks.head; }
  int64_t o_at(int64_t b, int64_t h) const { return b * os.batch + h * os.head; }
};

bool visible(const Problem& pr, int64_t b, int64_t i, int64_t j) {
  const int64_t pos = pr.S - pr.T + i;  // key position of query i
  if (pr.causal && pos - j < pr.p.min_distance) return false;  // j > pos, or nearer than min_distance
  const int64_t dist = pr.causal ? pos - j : std::llabs(pos - j);
  if (pr.p.window > 0 && dist >= pr.p.window) return false;
  if (pr.p.key_padding != nullptr && pr.p.key_padding[b * pr.S + j] != 0) return false;
  return true;
}

// f(dist) of the ALiBi shape: linear, ln(1 + dist), min(dist, cap).
double alibi_shape(const AttentionParams& p, int64_t dist) {
  switch (p.alibi.shape) {
    case AlibiShape::Linear: return static_cast<double>(dist);
    case AlibiShape::Log: return std::log1p(static_cast<double>(dist));
    case AlibiShape::Clipped: return std::min(static_cast<double>(dist), static_cast<double>(p.alibi.cap));
  }
  return 0.0;
}

int64_t alibi_dist(const Problem& pr, int64_t i, int64_t j) {
  const int64_t pos = pr.S - pr.T + i;
  return pr.p.bias == BiasPolicy::Alibi ? pos - j : std::llabs(pos - j);
}

double bias_value(const Problem& pr, int64_t h, int64_t i, int64_t j) {
  const AttentionParams& p = pr.p;
  switch (p.bias) {
    case BiasPolicy::None: return 0.0;
    case BiasPolicy::Alibi:
    case BiasPolicy::AlibiSym: {
      const double m = static_cast<double>(p.alibi.slopes[h]) * static_cast<double>(p.alibi.slope_scale);
      return -m * alibi_shape(p, alibi_dist(pr, i, j));
    }
    case BiasPolicy::T5: {
      const int bucket = t5_bucket(j - (pr.S - pr.T + i), p.t5.num_buckets, p.t5.max_distance, p.mask);
      return static_cast<double>(p.t5.table[bucket * pr.H + h]);
    }
  }
  return 0.0;
}

// Scores and probabilities of one (b, h): bias [T, S], score [T, S] (−inf where invisible),
// prob [T, S] (0 where invisible or the row has no visible key), lse [T].
struct HeadSoftmax {
  std::vector<double> bias, score, prob, lse;
  std::vector<double> span_m;  // [T, S] the soft span mask m_h(p_i − j) (1 without it)
  std::vector<double> rel;  // [T, S] u·k_j + (q_i + w)·R[dist] (0 without the relative-key term)
};

// ---- The relative-key term written as the two source codebases write it -----------------------
// Transformer-XL (REFERENCE.md §6.1): BD_raw[i, j'] = (q_i + w)·r_(j') with r_(j') the embedding
// of distance klen−1−j' (clamped), then _rel_shift: prepend a zero column ([T, 1+S]), view as
// [S+1, T], drop the first row, view back as [T, S].
std::vector<double> rel_shift(const std::vector<double>& x, int64_t T, int64_t S) {
  std::vector<double> padded(T * (S + 1), 0.0);  // [T, 1+S], column 0 zero
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) padded[i * (S + 1) + 1 + j] = x[i * S + j];
  // view [S+1, T]; drop row 0 (its T elements); view [T, S]
  return std::vector<double>(padded.begin() + T, padded.end());
}

// Adaptive Span (§5.3): _unskew(X [M, L+M]) = flatten, pad M zeros, view [M, L+M+1], keep the
// first L columns; _skew(A [M, L]) = pad M+1 zeros on the right, flatten, drop the last M, view
// [M, L+M].
std::vector<double> unskew(const std::vector<double>& x, int64_t M, int64_t L) {
  const int64_t N = L + M;
  std::vector<double> flat(x);
  flat.resize(M * N + M, 0.0);  // view [M, N + 1]
  std::vector<double> out(M * L);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t l = 0; l < L; ++l) out[i * L + l] = flat[i * (N + 1) + l];
  return out;
}
std::vector<double> skew(const std::vector<double>& a, int64_t M, int64_t L) {
  std::vector<double> padded(M * (L + M + 1), 0.0);  // [M, L+M+1]
  for (int64_t i = 0; i < M; ++i)
    for (int64_t l = 0; l < L; ++l) padded[i * (L + M + 1) + l] = a[i * L + l];
  padded.resize(padded.size() - M);  // drop the last M; view [M, L+M]
  return padded;
}

// Adaptive Span's mask as §5.1 builds it: template = linspace(1 − L, 0, L), mask =
// clamp((template + z·L)/R + 1, 0, 1); template index ℓ is distance L − ℓ. Distances outside
// [1, L] (no template entry) take the same closed form, clamp((R + z·L − (d − 1))/R, 0, 1).
void span_mask(const Problem& pr, int64_t h, std::vector<double>& m) {
  const int64_t T = pr.T, S = pr.S;
  m.assign(T * S, 1.0);
  if (!pr.span()) return;
  const int64_t L = pr.p.span.max_span;
  const double R = pr.p.span.ramp, z = pr.z_at(h);
  std::vector<double> templ(L), mask(L);
  for (int64_t l = 0; l < L; ++l) templ[l] = L > 1 ? (1.0 - L) + static_cast<double>(l) : 0.0;
  for (int64_t l = 0; l < L; ++l) mask[l] = std::clamp((templ[l] + z * L) / R + 1.0, 0.0, 1.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) {
      const int64_t d = S - T + i - j;
      m[i * S + j] = d >= 1 && d <= L ? mask[L - d] : std::clamp((R + z * L - (d - 1)) / R, 0.0, 1.0);
    }
}

// rel [T, S] for head h: the (u·k_j + (q_i + w)·R[dist]) part of the score before scaling, in the
// Transformer-XL form when distance 0 can be visible (min_distance = 0), else in the Adaptive
// Span form (key i+ℓ of query i at distance L−ℓ, ℓ over all distances 1..S−1).
template <class In>
void relative_term(const Problem& pr, int64_t h, const In* q, const In* k, std::vector<double>& rel) {
  const int64_t T = pr.T, S = pr.S, D = pr.D, rq = pr.qs.row, rk = pr.ks.row;
  rel.assign(T * S, 0.0);
  if (!pr.relkey()) return;
  auto qr_dot_r = [&](int64_t i, int64_t dist) {  // (q_i + w)·R[dist]
    const int64_t n = attention_relkey_row(pr.p, dist);
    double acc = 0.0;
    for (int64_t x = 0; x < D; ++x) acc += (static_cast<double>(q[i * rq + x]) + pr.w_at(h, x)) * pr.r_at(h, n, x);
    return acc;
  };
  std::vector<double> uk(T * S);  // u·k_j (the (c) term), the same for every row
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) {
      double acc = 0.0;
      for (int64_t x = 0; x < D; ++x) acc += pr.u_at(h, x) * static_cast<double>(k[j * rk + x]);
      uk[i * S + j] = acc;
    }
  if (pr.p.min_distance == 0) {  // Transformer-XL
    std::vector<double> bd_raw(T * S);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t jp = 0; jp < S; ++jp) bd_raw[i * S + jp] = qr_dot_r(i, S - 1 - jp);
    const std::vector<double> bd = rel_shift(bd_raw, T, S);
    for (int64_t x = 0; x < T * S; ++x) rel[x] = uk[x] + bd[x];
    return;
  }
  // Adaptive Span: L = S − 1 distances; the key axis extended on the left by T − 1 zero columns
  // so that it is [T, L + T] as _unskew expects (column c = key c − (T − 1)).
  const int64_t L = S - 1, M = T;
  if (L < 1) return;
  std::vector<double> x_ext(M * (L + M), 0.0), qp(M * L);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < S; ++j) x_ext[i * (L + M) + (M - 1) + j] = uk[i * S + j];
    for (int64_t l = 0; l < L; ++l) qp[i * L + l] = qr_dot_r(i, L - l);  // column ℓ: distance L − ℓ
  }
  std::vector<double> a = unskew(x_ext, M, L);
  for (int64_t x = 0; x < M * L; ++x) a[x] += qp[x];
  const std::vector<double> back = skew(a, M, L);  // [M, L + M]
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < S; ++j) rel[i * S + j] = back[i * (L + M) + (M - 1) + j];
}

// q, k: the (b, h) head's first row; rows pr.qs.row / pr.ks.row elements apart.
template <class In>
void head_softmax(const Problem& pr, int64_t b, int64_t h, const In* q, const In* k, HeadSoftmax& hs) {
  const int64_t T = pr.T, S = pr.S, D = pr.D, rq = pr.qs.row, rk = pr.ks.row;
  hs.bias.assign(T * S, 0.0);
  hs.score.assign(T * S, kNegInf);
  hs.prob.assign(T * S, 0.0);
  hs.lse.assign(T, kNegInf);
  relative_term(pr, h, q, k, hs.rel);
  span_mask(pr, h, hs.span_m);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) hs.bias[i * S + j] = visible(pr, b, i, j) ? bias_value(pr, h, i, j) : 0.0;
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j < S; ++j) {
      if (!visible(pr, b, i, j)) continue;
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[i * rq + d]) * static_cast<double>(k[j * rk + d]);
      hs.score[i * S + j] = pr.scale * (dot + hs.rel[i * S + j]) + hs.bias[i * S + j];
      if (pr.span() && !pr.span_after())  // the original's renormalised form: log m before the softmax
        hs.score[i * S + j] += hs.span_m[i * S + j] > 0.0 ? std::log(hs.span_m[i * S + j]) : kNegInf;
    }
    double mx = kNegInf;
    for (int64_t j = 0; j < S; ++j) mx = std::max(mx, hs.score[i * S + j]);
    if (mx == kNegInf) continue;  // no visible key: P = 0, lse = −inf
    double sum = 0.0;
    for (int64_t j = 0; j < S; ++j) sum += std::exp(hs.score[i * S + j] - mx);
    for (int64_t j = 0; j < S; ++j) hs.prob[i * S + j] = std::exp(hs.score[i * S + j] - mx) / sum;
    hs.lse[i] = mx + std::log(sum);
  }
}

// Z_ij = keep / (1 − p) for the dropout counter of (b, h, i, j).
double dropout_factor(const Problem& pr, int64_t b, int64_t h, int64_t i, int64_t j) {
  const DropoutParams& dp = pr.p.dropout;
  if (dp.p <= 0.f) return 1.0;
  const int64_t counter = ((b * pr.H + h) * pr.T + i) * pr.S + j;
  return dropout_keep(dp, counter) ? 1.0 / (1.0 - static_cast<double>(dp.p)) : 0.0;
}

// The soft mask's factor after the softmax (1 in the renormalised form or without a mask).
double after_m(const Problem& pr, const HeadSoftmax& hs, int64_t ij) { return pr.span_after() ? hs.span_m[ij] : 1.0; }

Problem make_problem(const AttentionParams& p, const RelKeyF64& rel) {
  attention_check(p);
  return Problem{p,
                 p.b,
                 p.h,
                 p.t,
                 p.s,
                 p.d,
                 static_cast<double>(attention_scale(p)),
                 p.mask == AttentionMask::Causal,
                 attention_rows_q(p),
                 attention_rows_kv(p),
                 attention_rows_out(p),
                 rel,
                 attention_relkey_strides(p)};
}

template <class In, class Out>
void forward_impl(Out* out, Out* lse, const In* q, const In* k, const In* v, const AttentionParams& p,
                  const RelKeyF64& rel) {
  const Problem pr = make_problem(p, rel);
  const int64_t T = pr.T, S = pr.S, D = pr.D, rk = pr.ks.row, ro = pr.os.row;
  HeadSoftmax hs;
  for (int64_t b = 0; b < pr.B; ++b) {
    for (int64_t h = 0; h < pr.H; ++h) {
      const int64_t bh = b * pr.H + h;
      const In* qh = q + pr.q_at(b, h);
      const In* kh = k + pr.k_at(b, h);
      const In* vh = v + pr.k_at(b, h);
      head_softmax(pr, b, h, qh, kh, hs);
      for (int64_t i = 0; i < T; ++i) {
        lse[bh * T + i] = static_cast<Out>(hs.lse[i]);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < S; ++j) {
            const double pz = hs.prob[i * S + j] * dropout_factor(pr, b, h, i, j) * after_m(pr, hs, i * S + j);
            acc += pz * static_cast<double>(vh[j * rk + d]);
          }
          out[pr.o_at(b, h) + i * ro + d] = static_cast<Out>(acc);
        }
      }
    }
  }
}

// Gradient outputs of the reference backward (float or double).
template <class P>
struct RefGrads {
  P* dslopes = nullptr;
  P* dt5_table = nullptr;
  P* drel_r = nullptr;
  P* drel_u = nullptr;
  P* drel_w = nullptr;
  P* dspan_z = nullptr;
};

template <class In, class Out, class ParamOut>
void backward_impl(Out* dq, Out* dk, Out* dv, const RefGrads<ParamOut>& g, const In* dout, const In* q,
                   const In* k, const In* v, const AttentionParams& p, const RelKeyF64& rel) {
  const Problem pr = make_problem(p, rel);
  ParamOut* dslopes = g.dslopes;
  ParamOut* dt5_table = g.dt5_table;
  const int64_t T = pr.T, S = pr.S, D = pr.D, H = pr.H, rq = pr.qs.row, rk = pr.ks.row, ro = pr.os.row;
  HeadSoftmax hs;
  std::vector<double> dp(T * S), ds(T * S);
  for (int64_t b = 0; b < pr.B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const In* qh = q + pr.q_at(b, h);
      const In* kh = k + pr.k_at(b, h);
      const In* vh = v + pr.k_at(b, h);
      const In* doh = dout + pr.o_at(b, h);
      head_softmax(pr, b, h, qh, kh, hs);
      double dz_acc = 0.0;  // ∂L/∂z_h of this (b, h)
      // dP_ij = (dout_i · v_j) Z_ij ; delta_i = Σ_j P_ij dP_ij ; dS_ij = P_ij (dP_ij − delta_i)
      for (int64_t i = 0; i < T; ++i) {
        double delta = 0.0;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0.0;
          if (hs.prob[i * S + j] != 0.0)
            for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(doh[i * ro + d]) * static_cast<double>(vh[j * rk + d]);
          dp[i * S + j] = dot * dropout_factor(pr, b, h, i, j) * after_m(pr, hs, i * S + j);
          // ∂L/∂m_ij: after the softmax P·Z·(dout·v) (below, via dz); before it, through dS.
          if (pr.span_after() && hs.prob[i * S + j] != 0.0)
            dz_acc += hs.prob[i * S + j] * dot * dropout_factor(pr, b, h, i, j) *
                      span_mask_dz(p.span, pr.z_at(h), S - T + i - j);
          delta += hs.prob[i * S + j] * dp[i * S + j];
        }
        for (int64_t j = 0; j < S; ++j) ds[i * S + j] = hs.prob[i * S + j] * (dp[i * S + j] - delta);
      }
      // score = scale·((q_i + u)·k_j + (q_i + w)·R[row(dist)]) + bias: the explicit formula per
      // (i, j), not the shifted matrices of the forward, so the two cross-check each other.
      const bool rk_on = pr.relkey();
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < S; ++j) {
            double kj = static_cast<double>(kh[j * rk + d]);
            if (rk_on && ds[i * S + j] != 0.0) kj += pr.r_at(h, attention_relkey_row(p, S - T + i - j), d);
            acc += ds[i * S + j] * kj;
          }
          dq[pr.q_at(b, h) + i * rq + d] += static_cast<Out>(pr.scale * acc);
        }
      if (rk_on) {  // ∂/∂R[n] = scale Σ ds (q_i + w), ∂/∂u = scale Σ ds k_j, ∂/∂w = scale Σ ds R[n]
        const RelKeyStrides rs = pr.rs;
        const int64_t rows = p.relkey.rows;
        std::vector<double> d_r(rows * D, 0.0), d_u(D, 0.0), d_w(D, 0.0);
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j) {
            const double dsij = pr.scale * ds[i * S + j];
            if (dsij == 0.0) continue;
            const int64_t n = attention_relkey_row(p, S - T + i - j);
            for (int64_t d = 0; d < D; ++d) {
              d_r[n * D + d] += dsij * (static_cast<double>(qh[i * rq + d]) + pr.w_at(h, d));
              d_u[d] += dsij * static_cast<double>(kh[j * rk + d]);
              d_w[d] += dsij * pr.r_at(h, n, d);
            }
          }
        for (int64_t d = 0; d < D; ++d) {
          if (g.drel_u != nullptr && p.relkey.u != nullptr) g.drel_u[h * D + d] += static_cast<ParamOut>(d_u[d]);
          if (g.drel_w != nullptr && p.relkey.w != nullptr) g.drel_w[h * D + d] += static_cast<ParamOut>(d_w[d]);
          if (g.drel_r != nullptr)
            for (int64_t n = 0; n < rows; ++n)
              g.drel_r[n * rs.row + h * rs.head + d * rs.elem] += static_cast<ParamOut>(d_r[n * D + d]);
        }
      }
      for (int64_t j = 0; j < S; ++j)
        for (int64_t d = 0; d < D; ++d) {
          double acc_k = 0.0, acc_v = 0.0;
          for (int64_t i = 0; i < T; ++i) {
            acc_k += ds[i * S + j] * (static_cast<double>(qh[i * rq + d]) + pr.u_at(h, d));
            acc_v += hs.prob[i * S + j] * dropout_factor(pr, b, h, i, j) * after_m(pr, hs, i * S + j) *
                     static_cast<double>(doh[i * ro + d]);
          }
          dk[pr.k_at(b, h) + j * rk + d] += static_cast<Out>(pr.scale * acc_k);
          dv[pr.k_at(b, h) + j * rk + d] += static_cast<Out>(acc_v);
        }
      if (pr.span() && !pr.span_after())  // score += log m: ∂/∂z = (∂m/∂z) / m
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j)
            if (hs.span_m[i * S + j] > 0.0 && ds[i * S + j] != 0.0)
              dz_acc += ds[i * S + j] * span_mask_dz(p.span, pr.z_at(h), S - T + i - j) / hs.span_m[i * S + j];
      if (g.dspan_z != nullptr && pr.span()) g.dspan_z[p.span.heads == 1 ? 0 : h] += static_cast<ParamOut>(dz_acc);
      // Bias parameters: ∂score/∂slope_h = −slope_scale·f(dist); ∂score/∂table[bucket, h] = 1.
      if (dslopes != nullptr && (p.bias == BiasPolicy::Alibi || p.bias == BiasPolicy::AlibiSym)) {
        double acc = 0.0;
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j)
            if (visible(pr, b, i, j))
              acc += ds[i * S + j] * -static_cast<double>(p.alibi.slope_scale) * alibi_shape(p, alibi_dist(pr, i, j));
        dslopes[h] += static_cast<ParamOut>(acc);
      }
      if (dt5_table != nullptr && p.bias == BiasPolicy::T5) {
        std::vector<double> acc(p.t5.num_buckets, 0.0);
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j)
            if (visible(pr, b, i, j))
              acc[t5_bucket(j - (S - T + i), p.t5.num_buckets, p.t5.max_distance, p.mask)] += ds[i * S + j];
        for (int nb = 0; nb < p.t5.num_buckets; ++nb) dt5_table[nb * H + h] += static_cast<ParamOut>(acc[nb]);
      }
    }
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const AttentionParams& p) {
  forward_impl(out, lse, q, k, v, p, RelKeyF64{});
}

void attention_backward(float* dq, float* dk, float* dv, const AttentionGrads& extra, const float* dout,
                        const float* q, const float* k, const float* v, const float* /*out*/,
                        const float* /*lse*/, const AttentionParams& p) {
  const RefGrads<float> g{extra.dslopes, extra.dt5_table, extra.drel_r, extra.drel_u, extra.drel_w, extra.dspan_z};
  backward_impl(dq, dk, dv, g, dout, q, k, v, p, RelKeyF64{});
}

void attention_forward(double* out, double* lse, const double* q, const double* k, const double* v,
                       const AttentionParams& p, const RelKeyF64& rel) {
  forward_impl(out, lse, q, k, v, p, rel);
}

void attention_backward(double* dq, double* dk, double* dv, const AttentionGradsF64& extra,
                        const double* dout, const double* q, const double* k, const double* v,
                        const double* /*out*/, const double* /*lse*/, const AttentionParams& p,
                        const RelKeyF64& rel) {
  const RefGrads<double> g{extra.dslopes, extra.dt5_table, extra.drel_r, extra.drel_u, extra.drel_w, extra.dspan_z};
  backward_impl(dq, dk, dv, g, dout, q, k, v, p, rel);
}

}  // namespace stretch::ops::ref
