// ops/attention_reference.cpp — ref::attention_forward / ref::attention_backward: the oracle
// for the fused kernel, kept forever (contract in ops/attention.h).
// Naive on purpose: for one (b, h) at a time it materialises the [T, S] bias matrix, the
// [T, S] score matrix and the probabilities, computes everything in double (the float entry
// points round the double result once), and writes the visibility rule and every bias formula
// out directly per (i, j), sharing nothing with attention_cpu.cpp except t5_bucket() and
// dropout_keep(). Backward ignores the saved out and lse and recomputes the softmax, and takes
// delta_i = Σ_j P_ij dP_ij from its definition (not from dout·out).
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
  int64_t q_at(int64_t b, int64_t h) const { return b * qs.batch + h * qs.head; }
  int64_t k_at(int64_t b, int64_t h) const { return b * ks.batch + h * ks.head; }
  int64_t o_at(int64_t b, int64_t h) const { return b * os.batch + h * os.head; }
};

bool visible(const Problem& pr, int64_t b, int64_t i, int64_t j) {
  const int64_t pos = pr.S - pr.T + i;  // key position of query i
  if (pr.causal && j > pos) return false;
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
};

// q, k: the (b, h) head's first row; rows pr.qs.row / pr.ks.row elements apart.
template <class In>
void head_softmax(const Problem& pr, int64_t b, int64_t h, const In* q, const In* k, HeadSoftmax& hs) {
  const int64_t T = pr.T, S = pr.S, D = pr.D, rq = pr.qs.row, rk = pr.ks.row;
  hs.bias.assign(T * S, 0.0);
  hs.score.assign(T * S, kNegInf);
  hs.prob.assign(T * S, 0.0);
  hs.lse.assign(T, kNegInf);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) hs.bias[i * S + j] = visible(pr, b, i, j) ? bias_value(pr, h, i, j) : 0.0;
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = 0; j < S; ++j) {
      if (!visible(pr, b, i, j)) continue;
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[i * rq + d]) * static_cast<double>(k[j * rk + d]);
      hs.score[i * S + j] = pr.scale * dot + hs.bias[i * S + j];
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

Problem make_problem(const AttentionParams& p) {
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
                 attention_rows_out(p)};
}

template <class In, class Out>
void forward_impl(Out* out, Out* lse, const In* q, const In* k, const In* v, const AttentionParams& p) {
  const Problem pr = make_problem(p);
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
            const double pz = hs.prob[i * S + j] * dropout_factor(pr, b, h, i, j);
            acc += pz * static_cast<double>(vh[j * rk + d]);
          }
          out[pr.o_at(b, h) + i * ro + d] = static_cast<Out>(acc);
        }
      }
    }
  }
}

template <class In, class Out, class ParamOut>
void backward_impl(Out* dq, Out* dk, Out* dv, ParamOut* dslopes, ParamOut* dt5_table, const In* dout,
                   const In* q, const In* k, const In* v, const AttentionParams& p) {
  const Problem pr = make_problem(p);
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
      // dP_ij = (dout_i · v_j) Z_ij ; delta_i = Σ_j P_ij dP_ij ; dS_ij = P_ij (dP_ij − delta_i)
      for (int64_t i = 0; i < T; ++i) {
        double delta = 0.0;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0.0;
          if (hs.prob[i * S + j] != 0.0)
            for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(doh[i * ro + d]) * static_cast<double>(vh[j * rk + d]);
          dp[i * S + j] = dot * dropout_factor(pr, b, h, i, j);
          delta += hs.prob[i * S + j] * dp[i * S + j];
        }
        for (int64_t j = 0; j < S; ++j) ds[i * S + j] = hs.prob[i * S + j] * (dp[i * S + j] - delta);
      }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < S; ++j) acc += ds[i * S + j] * static_cast<double>(kh[j * rk + d]);
          dq[pr.q_at(b, h) + i * rq + d] += static_cast<Out>(pr.scale * acc);
        }
      for (int64_t j = 0; j < S; ++j)
        for (int64_t d = 0; d < D; ++d) {
          double acc_k = 0.0, acc_v = 0.0;
          for (int64_t i = 0; i < T; ++i) {
            acc_k += ds[i * S + j] * static_cast<double>(qh[i * rq + d]);
            acc_v += hs.prob[i * S + j] * dropout_factor(pr, b, h, i, j) * static_cast<double>(doh[i * ro + d]);
          }
          dk[pr.k_at(b, h) + j * rk + d] += static_cast<Out>(pr.scale * acc_k);
          dv[pr.k_at(b, h) + j * rk + d] += static_cast<Out>(acc_v);
        }
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
  forward_impl(out, lse, q, k, v, p);
}

void attention_backward(float* dq, float* dk, float* dv, const AttentionGrads& extra, const float* dout,
                        const float* q, const float* k, const float* v, const float* /*out*/,
                        const float* /*lse*/, const AttentionParams& p) {
  backward_impl(dq, dk, dv, extra.dslopes, extra.dt5_table, dout, q, k, v, p);
}

void attention_forward(double* out, double* lse, const double* q, const double* k, const double* v,
                       const AttentionParams& p) {
  forward_impl(out, lse, q, k, v, p);
}

void attention_backward(double* dq, double* dk, double* dv, const AttentionGradsF64& extra,
                        const double* dout, const double* q, const double* k, const double* v,
                        const double* /*out*/, const double* /*lse*/, const AttentionParams& p) {
  backward_impl(dq, dk, dv, extra.dslopes, extra.dt5_table, dout, q, k, v, p);
}

}  // namespace stretch::ops::ref
