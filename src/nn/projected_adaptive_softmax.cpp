// nn/projected_adaptive_softmax.cpp — see projected_adaptive_softmax.h.
#include "nn/projected_adaptive_softmax.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "nn/chunked_nll.h"
#include "ops/cross_entropy.h"

namespace stretch::nn {

using namespace stretch::autograd;

namespace {

constexpr int32_t kNoIgnore = -1000000;  // an ignore index no target equals

// dst[j] = in[j] − logsumexp(in) + add (double accumulation, as AdaptiveSoftmax::log_scores)
void log_softmax_row(const float* in, float* dst, int64_t v, float add) {
  float mx = in[0];
  for (int64_t j = 1; j < v; ++j) mx = std::max(mx, in[j]);
  double s = 0;
  for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(in[j] - mx));
  const float lse = mx + static_cast<float>(std::log(s));
  for (int64_t j = 0; j < v; ++j) dst[j] = in[j] - lse + add;
}

}  // namespace

ProjectedAdaptiveSoftmax::ProjectedAdaptiveSoftmax(ProjectedAdaptiveSoftmaxWeights w) : w_(std::move(w)) {
  const int64_t k = w_.bands.count();
  STRETCH_CHECK(k >= 1 && w_.bands.ends.back() == w_.vocab_size, "projected adaptive softmax: bands do not end at V");
  STRETCH_CHECK(w_.full_weight.defined() || static_cast<int64_t>(w_.weight.size()) == k,
                "projected adaptive softmax: " << w_.weight.size() << " band weights for " << k << " bands");
  STRETCH_CHECK(w_.proj.empty() || static_cast<int64_t>(w_.proj.size()) == k,
                "projected adaptive softmax: " << w_.proj.size() << " projections for " << k << " bands");
  STRETCH_CHECK(k == 1 || (w_.cluster_weight.defined() && w_.cluster_bias.defined()),
                "projected adaptive softmax: clusters without cluster_weight/cluster_bias");
}

Var ProjectedAdaptiveSoftmax::logits(int64_t band, const Var& x) const {
  const auto i = static_cast<size_t>(band);
  Var z = x;  // [n, C]
  if (!w_.proj.empty() && w_.proj[i].defined()) z = linear_transposed(x, w_.proj[i]);  // x · P [C, d] -> [n, d]
  Var W, b;
  if (w_.full_weight.defined()) {
    W = slice_rows(w_.full_weight, w_.bands.start(band), w_.bands.size(band));  // [size, C]
    b = slice_rows(w_.full_bias, w_.bands.start(band), w_.bands.size(band));    // [size]
  } else {
    W = w_.weight[i];
    b = w_.bias[i];
  }
  if (band == 0 && w_.bands.count() > 1) {
    W = concat_rows(W, w_.cluster_weight);  // [c_0 + k − 1, d_0]
    b = concat_rows(b, w_.cluster_bias);    // [c_0 + k − 1]
  }
  return linear(z, W, b);
}

int32_t ProjectedAdaptiveSoftmax::head_target(int32_t word) const {
  const int64_t c0 = w_.bands.size(0);
  return word < c0 ? word : static_cast<int32_t>(c0 + w_.bands.band_of(word) - 1);
}

HeadLoss ProjectedAdaptiveSoftmax::loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const {
  const int64_t C = w_.input_dim, n = hidden.numel() / C;
  STRETCH_CHECK(targets.numel() == n, "adaptive softmax: " << targets.numel() << " targets for " << n << " rows");
  const int32_t* t = targets.i32();
  check_target_ids(t, n, w_.vocab_size, pad);
  const BandRoute r = route(w_.bands, t, n, pad);
  Tensor head_t = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) head_t.i32()[i] = t[i] == pad ? pad : head_target(t[i]);
  const LogitsBuffer buffer = use == LossUse::Training ? LogitsBuffer::ReuseForGradient : LogitsBuffer::Keep;
  HeadLoss out;
  out.loss = cross_entropy(logits(0, hidden), head_t, pad, ops::Reduction::Sum, &out.ntokens, buffer);
  for (int64_t b = 1; b < w_.bands.count(); ++b) {
    const auto i = static_cast<size_t>(b);
    if (r.rows[i].numel() == 0) continue;
    out.loss = add(out.loss, cross_entropy(logits(b, gather_rows(hidden, r.rows[i])), r.local[i], kNoIgnore,
                                           ops::Reduction::Sum, nullptr, buffer));
  }
  out.sample_size = static_cast<double>(out.ntokens);
  return out;
}

void ProjectedAdaptiveSoftmax::target_nll(const Tensor& hidden, std::span<const int64_t> rows,
                                          std::span<const int32_t> targets, float* nll, int64_t chunk_rows) const {
  banded_target_nll(
      hidden, rows, targets, nll, chunk_rows, w_.bands, w_.vocab_size, [&](const Var& x) { return logits(0, x); },
      [&](int64_t b, const Var& x) { return logits(b, x); });
}

Tensor ProjectedAdaptiveSoftmax::log_scores(const Tensor& hidden) const {
  NoGradGuard no_grad;
  const int64_t C = w_.input_dim, n = hidden.numel() / C, c0 = w_.bands.size(0), V = w_.vocab_size;
  std::vector<int64_t> dims = hidden.shape().dims();
  dims.back() = V;
  Tensor out = Tensor::empty(Shape(dims));  // [.., V] log-probabilities
  const Var x(hidden.view({n, C}));
  Tensor head = logits(0, x).value();  // [N, c_0 + k − 1]
  const int64_t hw = head.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    float* row = head.f32() + i * hw;
    log_softmax_row(row, row, hw, 0.f);  // in place: the clusters' log-probs stay at c_0 + band − 1
    std::copy_n(row, c0, out.f32() + i * V);
  }
  for (int64_t b = 1; b < w_.bands.count(); ++b) {
    Tensor lg = logits(b, x).value();  // [N, size_b]
    const int64_t sb = w_.bands.size(b), s0 = w_.bands.start(b);
    for (int64_t i = 0; i < n; ++i)
      log_softmax_row(lg.f32() + i * sb, out.f32() + i * V + s0, sb, head.f32()[i * hw + c0 + b - 1]);
  }
  return out;
}

}  // namespace stretch::nn
