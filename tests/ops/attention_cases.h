// tests/ops/attention_cases.h — the attention op-test registry: named cases (shape, mask,
// bias policy and its options, window, key padding, dropout, learnable bias) and a Problem
// that owns random inputs for one case and builds its AttentionParams. Shared by the
// fast-vs-reference tests and the float64 gradient checks.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"
#include "ops/gemm.h"

namespace stretch::ops::testing {

// Largest |fd − an| relative to the largest analytic gradient entry (float64 gradient checks).
inline double rel_err(const std::vector<double>& fd, const std::vector<double>& an) {
  double err = 0.0, mag = 1e-6;
  for (size_t i = 0; i < fd.size(); ++i) {
    err = std::max(err, std::abs(fd[i] - an[i]));
    mag = std::max(mag, std::abs(an[i]));
  }
  return err / mag;
}

// Sets the matrix-product precision (the bf16 attention path follows it) for a scope.
struct PrecisionScope {
  explicit PrecisionScope(GemmPrecision p) : saved(matmul_precision()) { set_matmul_precision(p); }
  ~PrecisionScope() { set_matmul_precision(saved); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;
  GemmPrecision saved;
};

enum class Padding : uint8_t {
  None,
  Some,       // every 5th key padded (in batch 0 also the first few keys)
  AllMasked,  // batch 0: the first S − T + 3 keys padded, so causal queries 0..2 see no key
  Batch0,     // batch 0: every key padded, so none of its queries sees a key (any mask)
};

enum class Learn : uint8_t { No, Yes };

struct AttnCase {
  std::string name;
  int64_t b = 1, h = 1, t = 1, s = 1, d = 8;
  AttentionMask mask = AttentionMask::Causal;
  BiasPolicy bias = BiasPolicy::None;
  AlibiShape shape = AlibiShape::Linear;
  float cap = 0.f;
  float slope_scale = 1.f;
  int num_buckets = 32, max_distance = 128;
  int64_t window = 0;
  Padding padding = Padding::None;
  float dropout = 0.f;
  Learn learn = Learn::No;
};

// gtest prints a case by its name.
inline void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

// Random inputs and parameters of one case, in float; to_double() copies for the f64 oracle.
struct Problem {
  AttnCase c;
  std::vector<float> q, k, v, dout, slopes, table;  // [B,H,T,D] [B,H,S,D] x2 [B,H,T,D] [H] [NB,H]
  std::vector<uint8_t> pad;                         // [B, S]

  explicit Problem(const AttnCase& cs, uint64_t seed = 1) : c(cs) {
    Rng rng(seed, 11);
    auto fill = [&](std::vector<float>& x, size_t n, float lo, float hi) {
      x.resize(n);
      for (auto& e : x) e = rng.uniform(lo, hi);
    };
    fill(q, c.b * c.h * c.t * c.d, -1.f, 1.f);
    fill(k, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(v, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(dout, c.b * c.h * c.t * c.d, -1.f, 1.f);
    slopes = alibi_slopes(static_cast<int>(c.h));
    fill(table, static_cast<size_t>(c.num_buckets) * c.h, -1.f, 1.f);
    pad.assign(c.b * c.s, 0);
    if (c.padding == Padding::Some)
      for (int64_t b = 0; b < c.b; ++b)
        for (int64_t j = 0; j < c.s; ++j) pad[b * c.s + j] = (j % 5 == 3) || (b == 0 && j < 2);
    if (c.padding == Padding::AllMasked)
      for (int64_t j = 0; j < std::min(c.s, c.s - c.t + 3); ++j) pad[j] = 1;
    if (c.padding == Padding::Batch0) std::fill(pad.begin(), pad.begin() + c.s, uint8_t{1});
  }

  AttentionParams params() const {
    AttentionParams p;
    p.b = c.b, p.h = c.h, p.t = c.t, p.s = c.s, p.d = c.d;
    p.mask = c.mask;
    p.bias = c.bias;
    p.alibi = AlibiOptions{.slopes = slopes.data(), .slope_scale = c.slope_scale, .shape = c.shape, .cap = c.cap};
    p.t5 = T5Options{.table = table.data(), .num_buckets = c.num_buckets, .max_distance = c.max_distance};
    p.window = c.window;
    p.key_padding = c.padding == Padding::None ? nullptr : pad.data();
    p.dropout = DropoutParams{.p = c.dropout, .seed = 1234, .stream = 5};
    return p;
  }
  size_t n_q() const { return q.size(); }
  size_t n_kv() const { return k.size(); }
  size_t n_rows() const { return static_cast<size_t>(c.b * c.h * c.t); }
};

inline std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// max |a − b| / max(max |b|, floor): an error relative to the tensor's scale. For out, lse and
// the bias-parameter gradients; dq, dk and dv use gradient_error below.
inline double scaled_error(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-3) {
  double err = 0.0, mag = floor;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isinf(y) || std::isinf(x)) {
      if (x != y) return INFINITY;
      continue;
    }
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    err = std::max(err, std::abs(x - y));
    mag = std::max(mag, std::abs(y));
  }
  return err / mag;
}

// P_ij (with_dropout = false) or P_ij·Z_ij (true) as [B, H, T, S], from the double reference
// forward itself (so every mask, window, padding, bias and dropout rule is the reference's): q and
// k zero-padded to D' = max(D, S) with the scale kept at 1/sqrt(D), and v = the identity, so
// out_i = Σ_j P_ij Z_ij e_j is row i of P·Z.
inline std::vector<double> probabilities(const Problem& pb, bool with_dropout) {
  const AttnCase& c = pb.c;
  const int64_t BH = c.b * c.h, T = c.t, S = c.s, D = c.d, D2 = std::max(c.d, c.s);
  AttentionParams p = pb.params();
  p.scale = attention_scale(p);
  p.d = D2;
  if (!with_dropout) p.dropout.p = 0.f;
  std::vector<double> q2(BH * T * D2, 0.0), k2(BH * S * D2, 0.0), v2(BH * S * D2, 0.0);
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t i = 0; i < T; ++i)
      for (int64_t d = 0; d < D; ++d) q2[(bh * T + i) * D2 + d] = pb.q[(bh * T + i) * D + d];
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t d = 0; d < D; ++d) k2[(bh * S + j) * D2 + d] = pb.k[(bh * S + j) * D + d];
      v2[(bh * S + j) * D2 + j] = 1.0;
    }
  }
  std::vector<double> out(BH * T * D2), lse(BH * T), prob(BH * T * S);
  ref::attention_forward(out.data(), lse.data(), q2.data(), k2.data(), v2.data(), p);
  for (int64_t r = 0; r < BH * T; ++r)
    for (int64_t j = 0; j < S; ++j) prob[r * S + j] = out[r * D2 + j];
  return prob;
}

// The magnitudes of what the backward sums, per element of dq, dk and dv (packed layouts), in
// double. With dP_ij = Z_ij·dout_i·v_j and delta_i = dout_i·out_i = Σ_j P_ij·dP_ij,
//   dq_i = scale Σ_j P_ij (dP_ij − delta_i) k_j,  dk_j = scale Σ_i P_ij (dP_ij − delta_i) q_i,
//   dv_j = Σ_i P_ij Z_ij dout_i,
// and each dot product is itself a sum over D. Summed in fp32, each result carries an error of
// order eps · (the sum of the |terms| that enter it), however much they cancel (Higham, Accuracy
// and Stability of Numerical Algorithms, §4.2):
//   A_ij = Σ_d |dout_id|·|v_jd|       (the terms of dout_i·v_j)
//   M_i  = Σ_j P_ij Z_ij A_ij          (the terms of delta_i, through out_i = Σ_j P_ij Z_ij v_j)
//   dq: scale Σ_j (P_ij Z_ij A_ij + P_ij M_i) |k_j|   dk: scale Σ_i (P_ij Z_ij A_ij + P_ij M_i) |q_i|
//   dv: Σ_i P_ij Z_ij |dout_i|
struct GradTerms {
  std::vector<double> dq, dk, dv;
};
inline GradTerms grad_terms(const Problem& pb) {
  const AttnCase& c = pb.c;
  const int64_t BH = c.b * c.h, T = c.t, S = c.s, D = c.d;
  const double scale = attention_scale(pb.params());
  const std::vector<double> P = probabilities(pb, false), PZ = probabilities(pb, true);
  GradTerms g{std::vector<double>(BH * T * D, 0.0), std::vector<double>(BH * S * D, 0.0),
              std::vector<double>(BH * S * D, 0.0)};
  std::vector<double> A(T * S), G(T * S);
  for (int64_t bh = 0; bh < BH; ++bh) {
    const float* q = pb.q.data() + bh * T * D;
    const float* k = pb.k.data() + bh * S * D;
    const float* v = pb.v.data() + bh * S * D;
    const float* dout = pb.dout.data() + bh * T * D;
    const double* p = P.data() + bh * T * S;
    const double* pz = PZ.data() + bh * T * S;
    for (int64_t i = 0; i < T; ++i) {
      double m = 0.0;
      for (int64_t j = 0; j < S; ++j) {
        double a = 0.0;
        for (int64_t d = 0; d < D; ++d) a += std::abs(static_cast<double>(dout[i * D + d]) * v[j * D + d]);
        A[i * S + j] = a;
        m += pz[i * S + j] * a;
      }
      for (int64_t j = 0; j < S; ++j) G[i * S + j] = pz[i * S + j] * A[i * S + j] + p[i * S + j] * m;
    }
    double* gq = g.dq.data() + bh * T * D;
    double* gk = g.dk.data() + bh * S * D;
    double* gv = g.dv.data() + bh * S * D;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j) {
        const double gij = G[i * S + j], pzij = pz[i * S + j];
        if (gij == 0.0 && pzij == 0.0) continue;
        for (int64_t d = 0; d < D; ++d) {
          gq[i * D + d] += scale * gij * std::abs(k[j * D + d]);
          gk[j * D + d] += scale * gij * std::abs(q[i * D + d]);
          gv[j * D + d] += pzij * std::abs(dout[i * D + d]);
        }
      }
  }
  return g;
}

// max |a − b| / max(floor, max |b|, max terms): scaled_error with the scale taken from the sum of
// |terms| that enter each gradient element (grad_terms) rather than from the result alone. The two
// agree when the terms do not cancel; where they cancel exactly — a row that sees one key (window
// 1, or one unpadded key): P = 1, dP = delta, so dq = dk = 0 in exact arithmetic — max |b| is 0,
// the fast kernel returns fp32 rounding of (dP − delta) (~1e-8 with O(1) operands: delta is a
// SIMD reduction, dP a tile product, summed in different orders), and the old metric divided that
// by its 1e-3 floor. Measured against the terms it is ~1e-8; a wrong or missing term is O(1)
// relative to them (see AttentionMetric.CatchesAWrongGradient).
inline double gradient_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<double>& terms,
                             double floor = 1e-3) {
  double mag = floor;
  for (double t : terms) mag = std::max(mag, t);
  const double rel = scaled_error(a, b, floor);  // max |a − b| / max(floor, max |b|), inf/NaN aware
  if (!std::isfinite(rel)) return rel;
  double bmax = floor;
  for (float y : b) bmax = std::max(bmax, static_cast<double>(std::abs(y)));
  return rel * bmax / std::max(mag, bmax);
}

}  // namespace stretch::ops::testing
