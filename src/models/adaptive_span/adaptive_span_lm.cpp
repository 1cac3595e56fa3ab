// models/adaptive_span/adaptive_span_lm.cpp — see adaptive_span_lm.h.
#include "models/adaptive_span/adaptive_span_lm.h"

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/adaptive_span/span_attention.h"
#include "models/adaptive_span/span_cache.h"

namespace stretch::models {

using autograd::Var;
namespace as = adaptive_span;

namespace {
constexpr uint64_t kMaxMicro = 256;  // micro-batches per update with distinct dropout masks

// Rows of [B, rows, C] laid out as `plan` says: the first drop rows dropped or pad zero rows in front.
Tensor trimmed_cache(const Tensor& cache, const as::TrimPlan& plan) {
  const int64_t B = cache.dim(0), R = cache.dim(1), C = cache.dim(2), S = plan.span;
  Tensor out = Tensor::empty({B, S, C});
  for (int64_t b = 0; b < B; ++b) {
    float* o = out.f32() + b * S * C;
    std::fill_n(o, plan.pad_front * C, 0.f);
    const int64_t from = plan.drop_front, n = S - plan.pad_front;  // n = R − drop
    std::copy_n(cache.f32() + (b * R + from) * C, n * C, o + plan.pad_front * C);
  }
  return out;
}

// The next cache: the last from_cache rows of the old cache, then the last from_input rows of h.
Tensor next_cache_rows(const Tensor& cache, const Tensor& h, const as::NextCache& n) {
  const int64_t B = h.dim(0), M = h.dim(1), C = h.dim(2), R = cache.dim(1), rows = n.from_cache + n.from_input;
  Tensor out = Tensor::empty({B, rows, C});
  for (int64_t b = 0; b < B; ++b) {
    float* o = out.f32() + b * rows * C;
    std::copy_n(cache.f32() + (b * R + R - n.from_cache) * C, n.from_cache * C, o);
    std::copy_n(h.f32() + (b * M + M - n.from_input) * C, n.from_input * C, o + n.from_cache * C);
  }
  return out;
}

double max_of(const Var& z) { return *std::max_element(z.data(), z.data() + z.numel()); }
double mean_of(const Var& z) {
  double s = 0;
  for (int64_t i = 0; i < z.numel(); ++i) s += z.data()[i];
  return s / static_cast<double>(z.numel());
}
void clamp01(const Var& z) {
  for (int64_t i = 0; i < z.numel(); ++i) z.data()[i] = std::clamp(z.data()[i], 0.f, 1.f);
}
}  // namespace

nn::HeadLoss SpanLossHead::loss(const Var& hidden, const Tensor& targets, int32_t pad, nn::LossUse use) const {
  nn::HeadLoss out = softmax_.loss(hidden, targets, pad, use);
  out.sample_size = static_cast<double>(targets.numel());  // fairseq's ntokens under truncated_bptt_lm: B·M
  return out;
}

AdaptiveSpanLM::AdaptiveSpanLM(AdaptiveSpanConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  c.validate();
  STRETCH_CHECK(c.vocab_size > 0, "adaptive_span: vocab_size is not set (it comes from dict.txt)");
  const int64_t C = c.d_model, V = c.vocab_size, D = c.head_dim(), L = c.attn_span, F = c.d_inner;
  const std::string p = "decoder.model.";
  in_emb_ = nn::Embedding::make(params_, p + "in_emb.weight", V, C);
  out_weight_ = params_.add(p + "out_emb.weight", {V, C});
  out_bias_ = params_.add(p + "out_emb.bias", {V});
  key_pe_ = params_.add(p + "key_pe", {1, D, L});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string q = p + "layers." + std::to_string(l) + ".";
    Layer layer;
    layer.z = params_.add(q + "attn.attn.adaptive_span._mask.current_val",
                          c.adapt_span_layer ? Shape{1} : Shape{c.n_head, 1, 1});
    layer.proj_query = nn::Linear::make(params_, q + "attn.proj_query.", C, C, nn::Bias::Without);
    layer.proj_out = nn::Linear::make(params_, q + "attn.proj_out.", C, C, nn::Bias::Without);
    layer.proj_val = nn::Linear::make(params_, q + "attn.proj_val.", C, C, nn::Bias::Without);
    layer.proj_key = nn::Linear::make(params_, q + "attn.proj_key.", C, C, nn::Bias::Without);
    layer.norm1 = nn::LayerNorm::make(params_, q + "norm1.", C);
    layer.ff = nn::FeedForward::make(params_, q + "ff.", C, F, ops::Activation::Relu);
    layer.norm2 = nn::LayerNorm::make(params_, q + "norm2.", C);
    layers_.push_back(std::move(layer));
  }
  head_ = std::make_unique<SpanLossHead>(out_weight_, out_bias_);
}

ModelInfo AdaptiveSpanLM::info() const {
  const auto& c = config_;
  return {.arch = c.arch,
          .family = "adaptive_span",
          .vocab_size = c.vocab_size,
          .padding_idx = c.padding_idx,
          .tokens_per_sample = c.tokens_per_sample,
          .label = "adaptive_span",
          .summary = c.arch + " attn_span=" + std::to_string(c.attn_span) + (c.adapt_span_layer ? " per-layer" : "") +
                     (c.adapt_span_renormalise ? " renormalised" : "") +
                     (c.adapt_span_clamp == SpanClamp::AfterStep ? " clamp=after_step" : "")};
}

// fairseq's initialisers (examples/adaptive_span/adaptive_span_model.py), drawn in parameter order:
// in_emb N(0, C^-1/2); out_emb nn.Linear's default U(±1/√C) for weight and bias; key_pe N(0, 1)
// (torch.randn); z = adapt_span_init; proj_* xavier_normal (N(0, √(2/(C + C)))); fc1/fc2
// xavier_uniform with nn.Linear's default bias U(±1/√fan_in); LayerNorm 1 / 0.
void AdaptiveSpanLM::init(uint64_t seed) {
  const auto& c = config_;
  const int64_t C = c.d_model;
  Rng rng(seed, /*stream=*/0x1414);
  nn::init_normal(in_emb_.weight, 0.f, 1.0f / std::sqrt(static_cast<float>(C)), rng);
  nn::init_uniform_fan_in(out_weight_, C, rng);
  nn::init_uniform_fan_in(out_bias_, C, rng);
  nn::init_normal(key_pe_, 0.f, 1.f, rng);
  const float xavier_std = std::sqrt(2.0f / static_cast<float>(C + C));
  for (auto& L : layers_) {
    nn::init_constant(L.z, c.adapt_span_init);
    for (nn::Linear* p : {&L.proj_query, &L.proj_out, &L.proj_val, &L.proj_key})
      nn::init_normal(p->weight, 0.f, xavier_std, rng);
    L.norm1.init();
    nn::init_xavier_uniform(L.ff.fc1.weight, 1.0f, rng);
    nn::init_uniform_fan_in(L.ff.fc1.bias, C, rng);
    nn::init_xavier_uniform(L.ff.fc2.weight, 1.0f, rng);
    nn::init_uniform_fan_in(L.ff.fc2.bias, c.d_inner, rng);
    L.norm2.init();
  }
}

uint64_t AdaptiveSpanLM::dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const {
  return (opt.step << 24) ^ (opt.micro << 16) ^ (static_cast<uint64_t>(layer + 1) << 4) ^ static_cast<uint64_t>(site);
}

std::unique_ptr<SegmentState> AdaptiveSpanLM::new_segment_state(SegmentUse use) const {
  if (use == SegmentUse::Training) return std::make_unique<SpanCache>(config_.n_layer);
  fail_usage(std::string("--arch adaptive_span: ") +
                 (use == SegmentUse::Decode ? "generation is not implemented for this family"
                                            : "--kv-cache evaluation does not apply (the model keeps a span cache)"),
             "evaluate with --task truncated_bptt_lm, which carries the span cache from block to block");
}

Var AdaptiveSpanLM::features(const Tensor& src, const ForwardOptions& opt) {
  const auto& c = config_;
  STRETCH_CHECK(src.rank() == 2, "features: src must be [B, M], got " << src.shape().str());
  const bool train = opt.mode == Mode::Train;
  if (train && opt.micro >= kMaxMicro)
    fail_usage("--update-freq " + std::to_string(opt.micro + 1) + ": at most " + std::to_string(kMaxMicro) +
                   " micro-batches per update have distinct dropout masks",
               "use --update-freq <= " + std::to_string(kMaxMicro));
  SpanCache fresh(c.n_layer);
  SpanCache* cache = &fresh;
  if (opt.state) {
    cache = dynamic_cast<SpanCache*>(opt.state);
    STRETCH_CHECK(cache, "features: the segment state was not made by this adaptive_span model");
  }
  const int64_t B = src.dim(0), M = src.dim(1), C = c.d_model;
  cache->check_rows(B);
  const as::SpanShape s = shape();
  if (cache->empty())  // fairseq's init_hid_cache: zeros of get_cache_size() rows, from z as it is
    for (int64_t l = 0; l < c.n_layer; ++l)
      cache->set_layer(l, Tensor::zeros({B, as::cache_size(s, as::trim_len(s, as::span_size(s, max_of(layers_[l].z)))), C}));

  Var h = in_emb_(src);  // [B, M, C]
  h = autograd::dropout(h, {.p = train ? c.emb_dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, -1, 0)});
  last_sizes_.clear();
  double avg = 0, mx = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    // Sizes from z as it is (before this forward's clamp), in fairseq's order.
    const int64_t trim = as::trim_len(s, as::span_size(s, max_of(L.z)));
    const int64_t size = as::cache_size(s, trim);
    const Tensor& old = cache->layer(l);  // [B, rows, C]
    const as::TrimPlan plan = as::trim_plan(s, trim, old.dim(1));
    last_sizes_.push_back({.trim_len = trim, .cache_size = size, .span = plan.span, .cache_rows_in = old.dim(1)});
    Tensor kept = trimmed_cache(old, plan);                                            // [B, S, C]
    Tensor next = next_cache_rows(old, h.value(), as::next_cache(size, old.dim(1), M));  // detached
    if (c.adapt_span_clamp == SpanClamp::Forward) clamp01(L.z);
    avg += static_cast<double>(as::span_size(s, mean_of(L.z)));
    mx = std::max(mx, static_cast<double>(as::span_size(s, max_of(L.z))));
    const Var kv = autograd::concat_time(kept, h);  // [B, S + M, C]
    const Var q = L.proj_query(h), k = L.proj_key(kv), v = L.proj_val(kv);
    const Var a = as::span_attention(
        q, k, v, key_pe_, L.z,
        {.heads = c.n_head,
         .span = plan.span,
         .attn_span = c.attn_span,
         .ramp = static_cast<float>(c.adapt_span_ramp),
         .mode = c.adapt_span_renormalise ? ops::SpanMaskMode::LogBeforeSoftmax : ops::SpanMaskMode::AfterSoftmax,
         .dropout = train ? c.dropout : 0.f,
         .seed = opt.seed,
         .stream = dropout_stream(opt, l, 1)});  // [B, M, C]
    h = L.norm1(autograd::add(h, L.proj_out(a)));
    h = L.norm2(autograd::add(h, L.ff(h, {.p = train ? c.dropout : 0.f, .seed = opt.seed,
                                          .stream = dropout_stream(opt, l, 2)})));
    cache->set_layer(l, std::move(next));
  }
  h = autograd::dropout(h, {.p = train ? c.emb_dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, c.n_layer, 0)});
  cache->advance(M);
  avg_span_ = avg / static_cast<double>(c.n_layer);
  max_span_ = mx;
  last_rows_ = B * M;
  // Every query is computed (the cache needs every layer's input rows); a scorer that wants only the
  // last n positions gets them.
  if (opt.last_block_queries > 0 && opt.last_block_queries < M) h = autograd::last_time(h, opt.last_block_queries);
  return h;
}

Var AdaptiveSpanLM::aux_loss() {
  const auto& c = config_;
  if (c.aux_loss_scaler == 0.f || last_rows_ == 0) return Var();
  const double scale = static_cast<double>(c.aux_loss_scaler) * static_cast<double>(last_rows_);
  double value = 0;
  std::vector<Var> zs;
  for (const Layer& L : layers_) {
    value += as::span_loss(shape(), {L.z.data(), static_cast<size_t>(L.z.numel())});
    zs.push_back(L.z);
  }
  Var out(Tensor::empty({1}));
  out.data()[0] = static_cast<float>(scale * value);
  if (autograd::grad_enabled()) {
    out.set_requires_grad(true);
    const double Ld = static_cast<double>(c.attn_span);
    autograd::tape().push([zs, out, scale, Ld] {
      const double g = out.grad_data()[0];
      for (const Var& z : zs) {
        const auto d = static_cast<float>(g * scale * Ld / static_cast<double>(z.numel()));
        for (int64_t i = 0; i < z.numel(); ++i) z.grad_data()[i] += d;
      }
      out.release_grad();
    });
  }
  return out;
}

void AdaptiveSpanLM::after_step() {
  if (config_.adapt_span_clamp != SpanClamp::AfterStep) return;
  for (const Layer& L : layers_) clamp01(L.z);
}

std::vector<std::pair<std::string, double>> AdaptiveSpanLM::train_metrics() const {
  return {{"avg_span", avg_span_}, {"max_span", max_span_}};
}

}  // namespace stretch::models
