// nn/adaptive_softmax.cpp — see adaptive_softmax.h.
#include "nn/adaptive_softmax.h"

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
}

AdaptiveSoftmax::AdaptiveSoftmax(ParameterList& params, const std::string& prefix, const AdaptiveSoftmaxConfig& config)
    : config_(config), bands_(VocabBands::make(config.cutoff, config.vocab_size)) {
  const int64_t C = config.input_dim, k = bands_.count();
  STRETCH_CHECK(!config.tie_proj || config.tied, "adaptive softmax: tied projections need tied weights");
  if (config.tied) {
    STRETCH_CHECK(config.tied->bands().ends == bands_.ends, "adaptive softmax: tied bands differ from the input's");
    STRETCH_CHECK(config.tied->band_dim(0) == C, "adaptive softmax: tied head needs the input's band-0 dim = C");
    class_proj_ = params.add(prefix + "head.class_proj.weight", {k - 1, C});
    own_.push_back(class_proj_);
  } else {
    head_ = params.add(prefix + "head.weight", {bands_.size(0) + k - 1, C});
    own_.push_back(head_);
  }
  for (int64_t b = 1; b < k; ++b) {
    const std::string t = prefix + "tail." + std::to_string(b - 1) + ".";
    const int64_t d = config.tied ? config.tied->band_dim(b) : VocabBands::dim(C, config.factor, b);
    if (config.tied && config.tie_proj) {
      proj_.push_back(Linear::tied(config.tied->projection(b), WeightLayout::InOut));  // [C, d_b], used transposed
    } else {
      proj_.push_back(Linear::make(params, t + "0.", C, d, Bias::Without));  // [d, C]
      own_.push_back(proj_.back().weight);
    }
    if (config.tied) {
      out_.push_back(Linear::tied(config.tied->table(b)));  // [size_b, d_b]
    } else {
      out_.push_back(Linear::make(params, t + "2.", d, bands_.size(b), Bias::Without));  // [size_b, d]
      own_.push_back(out_.back().weight);
    }
  }
}

void AdaptiveSoftmax::init(Rng& rng) {
  for (Var& w : own_) init_xavier_uniform(w, 1.0f, rng);
}

Var AdaptiveSoftmax::head_weight() const {
  if (head_.defined()) return head_;
  return concat_rows(config_.tied->table(0), class_proj_);  // word rows (the tied table), then clusters
}

Var AdaptiveSoftmax::tail(int64_t band, const Var& x, float p) const {
  const auto i = static_cast<size_t>(band - 1);
  Var z = proj_[i](x);  // [n, d]
  if (p > 0.f) z = dropout(z, {.p = p, .seed = seed_, .stream = stream_ ^ static_cast<uint64_t>(band)});
  return out_[i](z);  // [n, size_band]
}

HeadLoss AdaptiveSoftmax::loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const {
  const int64_t C = config_.input_dim, n = hidden.numel() / C, c0 = bands_.size(0);
  STRETCH_CHECK(targets.numel() == n, "adaptive softmax: " << targets.numel() << " targets for " << n << " rows");
  const bool train = use == LossUse::Training;
  const bool adaptive_loss = config_.criterion == AdaptiveCriterion::AdaptiveLoss;
  const float p = train ? config_.dropout : 0.f;
  Var x = hidden;
  if (adaptive_loss && p > 0.f) x = dropout(x, {.p = p, .seed = seed_, .stream = stream_});
  const int32_t* t = targets.i32();
  check_target_ids(t, n, config_.vocab_size, pad);
  const BandRoute r = route(bands_, t, n, pad);
  Tensor head_target = Tensor::empty({n}, DType::I32);  // w if w < c_0, else c_0 + band − 1
  for (int64_t i = 0; i < n; ++i)
    head_target.i32()[i] = t[i] == pad || t[i] < c0 ? t[i] : static_cast<int32_t>(c0 + bands_.band_of(t[i]) - 1);
  HeadLoss out;
  const LogitsBuffer buffer = train ? LogitsBuffer::ReuseForGradient : LogitsBuffer::Keep;
  out.loss = cross_entropy(linear(x, head_weight(), Var()), head_target, pad, ops::Reduction::Sum, &out.ntokens, buffer);
  for (int64_t b = 1; b < bands_.count(); ++b) {
    const auto i = static_cast<size_t>(b);
    if (r.rows[i].numel() == 0) continue;
    Var logits = tail(b, gather_rows(x, r.rows[i]), p);
    out.loss = add(out.loss, cross_entropy(logits, r.local[i], adaptive_loss ? pad : kNoIgnore, ops::Reduction::Sum,
                                           nullptr, buffer));
  }
  out.sample_size = static_cast<double>(out.ntokens);
  return out;
}

void AdaptiveSoftmax::target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                                 float* nll, int64_t chunk_rows) const {
  const Var head_w = head_weight();
  banded_target_nll(
      hidden, rows, targets, nll, chunk_rows, bands_, config_.vocab_size,
      [&](const Var& x) { return linear(x, head_w, Var()); },
      [&](int64_t b, const Var& x) { return tail(b, x, 0.f); });
}

Tensor AdaptiveSoftmax::log_scores(const Tensor& hidden) const {
  NoGradGuard no_grad;
  const int64_t C = config_.input_dim, n = hidden.numel() / C, c0 = bands_.size(0), V = config_.vocab_size;
  std::vector<int64_t> dims = hidden.shape().dims();
  dims.back() = V;
  Tensor out = Tensor::empty(Shape(dims));  // [.., V] log-probabilities
  const Var x(hidden.view({n, C}));
  Tensor head = linear(x, head_weight(), Var()).value();  // [N, c_0 + k − 1]
  const int64_t hw = head.dim(1);
  auto log_softmax_row = [](const float* in, float* dst, int64_t v, float add) {
    float mx = in[0];
    for (int64_t j = 1; j < v; ++j) mx = std::max(mx, in[j]);
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(in[j] - mx));
    const float lse = mx + static_cast<float>(std::log(s));
    for (int64_t j = 0; j < v; ++j) dst[j] = in[j] - lse + add;
  };
  std::vector<float> head_lp(static_cast<size_t>(hw));
  for (int64_t i = 0; i < n; ++i) {
    log_softmax_row(head.f32() + i * hw, head_lp.data(), hw, 0.f);
    std::copy_n(head_lp.data(), c0, out.f32() + i * V);
    for (int64_t b = 1; b < bands_.count(); ++b) head.f32()[i * hw + c0 + b - 1] = head_lp[static_cast<size_t>(c0 + b - 1)];
  }
  for (int64_t b = 1; b < bands_.count(); ++b) {
    Tensor lg = tail(b, x, 0.f).value();  // [N, size_b]
    const int64_t sb = bands_.size(b), s0 = bands_.start(b);
    for (int64_t i = 0; i < n; ++i)
      log_softmax_row(lg.f32() + i * sb, out.f32() + i * V + s0, sb, head.f32()[i * hw + c0 + b - 1]);
  }
  return out;
}

}  // namespace stretch::nn
