// ops/attention_bias.cpp — per-call setup of the fused kernel's bias evaluators and the
// reduction of the kernel's per-offset score gradients into parameter gradients
// (contract in ops/attention_bias.h).
#include "ops/attention_bias.h"

#include <algorithm>
#include <cstdlib>

namespace stretch::ops::attn {
namespace {

bool is_alibi(BiasPolicy b) { return b == BiasPolicy::Alibi || b == BiasPolicy::AlibiSym; }

// Distance the ALiBi shape sees for rel = j − p_i (0 for the masked rel > 0 of causal Alibi).
int64_t alibi_dist(const AttentionParams& p, int64_t rel) {
  if (p.bias == BiasPolicy::Alibi) return rel < 0 ? -rel : 0;
  return std::llabs(rel);
}

double alibi_f(const AttentionParams& p, int64_t dist) {
  switch (p.alibi.shape) {
    case AlibiShape::Linear: return static_cast<double>(dist);
    case AlibiShape::Log: return std::log1p(static_cast<double>(dist));
    case AlibiShape::Clipped: return std::min(static_cast<double>(dist), static_cast<double>(p.alibi.cap));
  }
  return 0.0;
}

}  // namespace

BiasSetup bias_setup(const AttentionParams& p, bool learn) {
  BiasSetup bs;
  bs.rel_lo = static_cast<int32_t>(-(p.s - 1));
  bs.rel_n = static_cast<int32_t>(p.s + p.t - 1);
  if (p.bias == BiasPolicy::None) return bs;
  if (is_alibi(p.bias)) {
    bs.slope_eff.resize(p.h);
    for (int64_t h = 0; h < p.h; ++h) bs.slope_eff[h] = p.alibi.slopes[h] * p.alibi.slope_scale;
    bs.n_params = learn ? 1 : 0;
    if (p.alibi.shape == AlibiShape::Linear) {
      bs.eval = p.bias == BiasPolicy::Alibi ? BiasEval::Linear : BiasEval::SymLinear;
      return bs;
    }
    bs.eval = BiasEval::AlibiShaped;
    bs.shape_f.resize(bs.rel_n);
    for (int32_t x = 0; x < bs.rel_n; ++x) bs.shape_f[x] = static_cast<float>(alibi_f(p, alibi_dist(p, bs.rel_lo + x)));
    return bs;
  } else {
    bs.n_params = learn ? p.t5.num_buckets : 0;
  }
  bs.eval = BiasEval::Table;
  bs.table.resize(static_cast<size_t>(p.h) * bs.rel_n);
  for (int32_t x = 0; x < bs.rel_n; ++x) {
    const int bucket = t5_bucket(bs.rel_lo + x, p.t5.num_buckets, p.t5.max_distance, p.mask);
    for (int64_t h = 0; h < p.h; ++h) bs.table[h * bs.rel_n + x] = p.t5.table[bucket * p.h + h];
  }
  return bs;
}

size_t bias_grad_floats(const BiasSetup& bs) {
  return bs.n_params > 0 && bs.eval == BiasEval::Table ? static_cast<size_t>(kGradLanes) * bs.rel_n : 0;
}

void bias_grad_reset(const BiasSetup& bs, BiasGrad& acc) {
  acc.moment = 0.0;
  acc.row = 0;
  if (acc.g != nullptr) std::fill(acc.g, acc.g + bias_grad_floats(bs), 0.f);
}

void bias_reduce_grad(const BiasSetup& bs, const AttentionParams& p, int64_t h, const BiasGrad& acc, double* dtheta) {
  if (bs.n_params == 0) return;
  const double scale = static_cast<double>(p.alibi.slope_scale);
  switch (bs.eval) {
    case BiasEval::None:
      return;
    case BiasEval::Linear:  // bias = slope·scale·rel
      dtheta[0] += scale * acc.moment;
      return;
    case BiasEval::SymLinear:  // bias = −slope·scale·|rel|
    case BiasEval::AlibiShaped:  // bias = −slope·scale·f(dist)
      dtheta[0] += -scale * acc.moment;
      return;
    case BiasEval::Table:
      break;
  }
  for (int32_t x = 0; x < bs.rel_n; ++x) {
    float gx = 0.f;
    for (int lane = 0; lane < kGradLanes; ++lane) gx += acc.g[static_cast<size_t>(lane) * bs.rel_n + x];
    if (gx == 0.f) continue;
    const int64_t rel = bs.rel_lo + x;
    dtheta[t5_bucket(rel, p.t5.num_buckets, p.t5.max_distance, p.mask)] += gx;  // ∂bias/∂table[bucket] = 1
  }
}

void bias_scatter_grad(const BiasSetup& bs, const AttentionParams& p, const double* partial,
                       const AttentionGrads& extra) {
  if (bs.n_params == 0) return;
  for (int64_t h = 0; h < p.h; ++h) {
    for (int k = 0; k < bs.n_params; ++k) {
      double acc = 0.0;
      for (int64_t b = 0; b < p.b; ++b) acc += partial[(b * p.h + h) * bs.n_params + k];
      if (is_alibi(p.bias)) extra.dslopes[h] += static_cast<float>(acc);
      else extra.dt5_table[k * p.h + h] += static_cast<float>(acc);
    }
  }
}

}  // namespace stretch::ops::attn
