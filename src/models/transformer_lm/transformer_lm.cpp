// models/transformer_lm/transformer_lm.cpp — see transformer_lm.h.
#include "models/transformer_lm/transformer_lm.h"

#include <cmath>
#include <string>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm/alibi_variants.h"
#include "models/transformer_lm/hidden_memory.h"
#include "position/attention_position.h"
#include "position/positions.h"

namespace stretch::models {

using namespace stretch::autograd;

namespace {
// Dropout stream fields: step << 24 | micro << 16 | (layer + 1) << 4 | site, XORed.
constexpr uint64_t kMaxMicro = 1u << 8, kMaxLayerSlots = 1u << 12;  // sites 0..4 and 7 < 16
constexpr int kLayerDropSite = 7;  // dropout_stream(opt, −1, 7): LayerDrop's per-block draws

std::unique_ptr<nn::AttentionPosition> make_upper_position(const TransformerLMConfig& c, PosMethod method,
                                                           const Var& t5_table) {
  const position::AttentionWindow w{c.attention_window};
  switch (method) {
    case PosMethod::T5: return std::make_unique<position::T5Bias>(t5_table, c.t5_num_buckets, c.t5_max_distance, w);
    case PosMethod::Rope: return std::make_unique<position::Rotary>(c.rope_base, w);
    case PosMethod::Alibi:  // built per layer by the constructor
    case PosMethod::Sinusoidal:
    case PosMethod::Learned:
    case PosMethod::None: return std::make_unique<position::NoBias>(w);
  }
  return nullptr;
}

PosMethod upper_method(UpperPos p) {
  switch (p) {
    case UpperPos::Rope: return PosMethod::Rope;
    case UpperPos::T5: return PosMethod::T5;
    case UpperPos::None: return PosMethod::None;
    case UpperPos::Same: break;
  }
  return PosMethod::None;
}

Var slopes_var(const std::vector<float>& m, bool learnable) {
  Tensor t = Tensor::empty({static_cast<int64_t>(m.size())});  // [H]
  std::copy(m.begin(), m.end(), t.f32());
  return Var(t, learnable);
}
}  // namespace

void KvCache::keep_last(int64_t memory) {
  // [B, H, S, D] -> [B, H, memory, D]
  for (auto& layer : layers)
    for (Tensor* t : {&layer.k, &layer.v}) {
      const int64_t B = t->dim(0), H = t->dim(1), S = t->dim(2), D = t->dim(3);
      if (S <= memory) continue;
      Tensor kept = Tensor::empty({B, H, memory, D});
      for (int64_t bh = 0; bh < B * H; ++bh)
        std::copy_n(t->f32() + (bh * S + S - memory) * D, memory * D, kept.f32() + bh * memory * D);
      *t = kept;
    }
}

TransformerLM::TransformerLM(TransformerLMConfig config) : config_(std::move(config)) {
  config_.validate();
  // One spelling of "no projection" (0), so that --decoder-input-dim C and a file without the key
  // describe the same architecture (config_json() is what resume and fine-tune compare).
  if (config_.decoder_input_dim == config_.decoder_embed_dim) config_.decoder_input_dim = 0;
  if (config_.decoder_output_dim == config_.decoder_embed_dim) config_.decoder_output_dim = 0;
  const auto& c = config_;
  // The adaptive softmax's masks use the layer slot after the last block.
  if (static_cast<uint64_t>(c.decoder_layers + (c.has_adaptive_softmax() ? 1 : 0)) >= kMaxLayerSlots)
    fail_usage("--decoder-layers " + std::to_string(c.decoder_layers) + ": at most " +
                   std::to_string(kMaxLayerSlots - 1) + " layers have distinct dropout masks",
               "use fewer layers");
  const int64_t C = c.decoder_embed_dim, V = c.vocab_size, in = c.input_dim(), out = c.output_dim();
  if (c.adaptive_input)
    adaptive_input_ = nn::AdaptiveInput(params_, "decoder.embed_tokens.",
                                        {.vocab_size = V,
                                         .padding_idx = c.padding_idx,
                                         .initial_dim = in,
                                         .factor = c.adaptive_input_factor,
                                         .output_dim = C,
                                         .cutoff = c.input_cutoffs()});
  else
    embed_tokens_ = nn::Embedding::make(params_, "decoder.embed_tokens.weight", V, in);  // [V, input]
  if (c.has_project_in()) project_in_ = nn::Linear::make(params_, "decoder.project_in_dim.", in, C, nn::Bias::Without);
  if (c.pos == PosMethod::Learned)
    embed_positions_ =
        nn::Embedding::make(params_, "decoder.embed_positions.weight", c.max_target_positions + c.padding_idx + 1, C);
  if (c.layernorm_embedding)  // fairseq registers it after embed_positions
    layernorm_embedding_ = nn::LayerNorm::make(params_, "decoder.layernorm_embedding.", C);
  if (c.t5_anywhere()) {  // registered last (fairseq's order); the attention strategies hold it
    const Shape shape{c.t5_num_buckets, c.decoder_attention_heads};
    t5_table_ = Var(Tensor::zeros(shape), true);
  }
  const std::vector<std::vector<float>> slopes = alibi_layer_slopes(c);  // [L][H]; empty rows: no ALiBi
  std::unique_ptr<nn::AttentionPosition> shared;
  if (c.pos != PosMethod::Alibi) shared = make_upper_position(c, c.pos, t5_table_);
  else if (c.pos_upper != UpperPos::Same) shared = make_upper_position(c, upper_method(c.pos_upper), t5_table_);
  const position::AlibiShapeSpec shape{.shape = c.alibi_shape, .cap = static_cast<float>(c.alibi_clip_distance)};
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    if (!layer_uses_alibi(c, l)) {
      positions_.push_back(nullptr);  // the shared strategy
      continue;
    }
    Var m = slopes_var(slopes[l], c.alibi_learnable_slopes);
    if (c.alibi_learnable_slopes) alibi_slopes_.push_back(m);
    auto a = std::make_unique<position::AlibiBias>(m, c.alibi_slope_scale, shape,
                                                   position::AttentionWindow{c.attention_window});
    alibi_layers_.push_back(a.get());
    positions_.push_back(std::move(a));
  }
  const nn::AttentionPosition* upper = shared.get();
  if (shared) positions_.push_back(std::move(shared));  // owned after the per-layer ones
  const nn::BlockConfig block{.dim = C,
                              .ffn_dim = c.decoder_ffn_embed_dim,
                              .heads = c.decoder_attention_heads,
                              .normalize_before = c.decoder_normalize_before,
                              .activation = c.activation_fn,
                              .scale_heads = c.scale_heads,
                              .scale_attn = c.scale_attn,
                              .scale_fc = c.scale_fc,
                              .scale_resids = c.scale_resids};
  layers_.reserve(static_cast<size_t>(c.decoder_layers));
  for (int64_t l = 0; l < c.decoder_layers; ++l)
    layers_.emplace_back(params_, "decoder.layers." + std::to_string(l) + ".", block,
                         positions_[l] ? positions_[l].get() : upper);
  if (c.has_final_norm()) final_norm_ = nn::LayerNorm::make(params_, "decoder.layer_norm.", C);
  if (c.has_project_out()) project_out_ = nn::Linear::make(params_, "decoder.project_out_dim.", C, out, nn::Bias::Without);
  if (c.has_adaptive_softmax()) {
    auto head = std::make_unique<nn::AdaptiveSoftmax>(
        params_, "decoder.adaptive_softmax.",
        nn::AdaptiveSoftmaxConfig{.vocab_size = V,
                                  .input_dim = out,
                                  .cutoff = c.softmax_cutoffs(),
                                  .dropout = c.adaptive_softmax_dropout,
                                  .factor = c.adaptive_softmax_factor,
                                  .tied = c.tie_adaptive_weights ? &adaptive_input_ : nullptr,
                                  .tie_proj = c.tie_adaptive_weights && c.tie_adaptive_proj,
                                  .criterion = c.criterion == Criterion::AdaptiveLoss ? nn::AdaptiveCriterion::AdaptiveLoss
                                                                                     : nn::AdaptiveCriterion::CrossEntropy});
    adaptive_ = head.get();
    head_ = std::move(head);
  } else {
    output_projection_ = c.share_decoder_input_output_embed
                             ? nn::Linear::tied(embed_tokens_.weight)
                             : nn::Linear::make(params_, "decoder.output_projection.", out, V, nn::Bias::Without);
    auto head = std::make_unique<nn::SoftmaxHead>(output_projection_.weight);
    softmax_ = head.get();
    head_ = std::move(head);
  }
  if (t5_table_.defined()) params_.add("decoder.relative_attention_bias.weight", t5_table_);
  for (size_t i = 0; i < alibi_slopes_.size(); ++i)  // ALiBi layers are 0..K-1: index = layer
    params_.add("decoder.layers." + std::to_string(i) + ".self_attn.alibi_slopes", alibi_slopes_[i]);
}

ModelInfo TransformerLM::info() const {
  const auto& c = config_;
  std::string summary = c.arch + " pos=" + pos_method_name(c.pos);
  if (c.layernorm_embedding) summary += " layernorm-embedding";
  for (const auto& [on, name] : {std::pair{c.scale_heads, "scale-heads"}, std::pair{c.scale_attn, "scale-attn"},
                                 std::pair{c.scale_fc, "scale-fc"}, std::pair{c.scale_resids, "scale-resids"}})
    if (on) summary += std::string(" ") + name;
  if (c.add_bos_token) summary += " add-bos-token";
  if (c.input_dim() != c.decoder_embed_dim) summary += " input-dim=" + std::to_string(c.input_dim());
  if (c.has_project_out()) summary += " output-dim=" + std::to_string(c.output_dim());
  if (c.adaptive_input) summary += " adaptive-input=" + c.adaptive_input_cutoff;
  if (c.has_adaptive_softmax()) {
    summary += " adaptive-softmax=" + c.adaptive_softmax_cutoff;
    if (c.tie_adaptive_weights) summary += c.tie_adaptive_proj ? " tied+proj" : " tied";
  }
  const std::string variants = alibi_variant_summary(c);
  if (!variants.empty()) summary += " " + variants;
  return {.arch = c.arch,
          .family = "transformer_lm",
          .vocab_size = c.vocab_size,
          .padding_idx = c.padding_idx,
          .tokens_per_sample = c.tokens_per_sample,
          .add_bos_token = c.add_bos_token,
          .label = pos_method_name(c.pos),
          .summary = summary};
}

void TransformerLM::init(uint64_t seed) {
  const auto& c = config_;
  const int64_t C = c.decoder_embed_dim, in = c.input_dim();
  Rng rng(seed, /*stream=*/0x1417);
  const float emb_std = 1.0f / std::sqrt(static_cast<float>(C));
  if (c.adaptive_input) {
    adaptive_input_.init(rng);
  } else {  // fairseq Embedding: N(0, input^-1/2), pad row 0
    nn::init_normal(embed_tokens_.weight, 0.f, 1.0f / std::sqrt(static_cast<float>(in)), rng);
    std::fill_n(embed_tokens_.weight.data() + c.padding_idx * in, in, 0.f);
  }
  if (project_in_.weight.defined()) nn::init_xavier_uniform(project_in_.weight, 1.0f, rng);  // fairseq's Linear()
  if (embed_positions_.weight.defined()) {  // LearnedPositionalEmbedding: same init, pad row 0
    nn::init_normal(embed_positions_.weight, 0.f, emb_std, rng);
    std::fill_n(embed_positions_.weight.data() + c.padding_idx * C, C, 0.f);
  }
  if (layernorm_embedding_.defined()) layernorm_embedding_.init();
  const float qkv_gain = 1.0f / std::sqrt(2.0f);
  for (auto& L : layers_) {
    auto& a = L.self_attn;
    for (nn::Linear* p : {&a.k_proj, &a.v_proj, &a.q_proj}) {
      nn::init_xavier_uniform(p->weight, qkv_gain, rng);
      nn::init_uniform_fan_in(p->bias, C, rng);
    }
    nn::init_xavier_uniform(a.out_proj.weight, 1.0f, rng);
    nn::init_constant(a.out_proj.bias, 0.f);
    L.self_attn_layer_norm.init();
    nn::init_uniform_fan_in(L.ffn.fc1.weight, C, rng);  // kaiming_uniform(a=√5) == U(±1/sqrt(fan_in))
    nn::init_uniform_fan_in(L.ffn.fc1.bias, C, rng);
    nn::init_uniform_fan_in(L.ffn.fc2.weight, c.decoder_ffn_embed_dim, rng);
    nn::init_uniform_fan_in(L.ffn.fc2.bias, c.decoder_ffn_embed_dim, rng);
    L.final_layer_norm.init();
    L.init_normformer();  // no draw: the other parameters keep their values for the seed
  }
  if (final_norm_.defined()) final_norm_.init();
  if (project_out_.weight.defined()) nn::init_xavier_uniform(project_out_.weight, 1.0f, rng);
  if (adaptive_) adaptive_->init(rng);
  else if (!c.share_decoder_input_output_embed)  // N(0, output^-1/2)
    nn::init_normal(output_projection_.weight, 0.f, 1.0f / std::sqrt(static_cast<float>(c.output_dim())), rng);
  if (t5_table_.defined()) nn::init_normal(t5_table_, 0.f, emb_std, rng);
  // Learnable slopes start from the variant's slopes (no random draw: the other parameters keep
  // the values plain ALiBi gives them for the same seed).
  const std::vector<std::vector<float>> slopes = alibi_layer_slopes(c);
  for (size_t i = 0; i < alibi_slopes_.size(); ++i) std::copy(slopes[i].begin(), slopes[i].end(), alibi_slopes_[i].data());
}

void TransformerLM::after_step() {
  if (!config_.alibi_positive_slopes) return;
  for (auto& m : alibi_slopes_)
    for (int64_t h = 0; h < m.numel(); ++h) m.data()[h] = std::max(m.data()[h], 0.f);
}

std::vector<std::string> TransformerLM::take_unused_params() {
  std::vector<std::string> out;
  if (config_.decoder_layerdrop > 0.f && layer_ran_.size() == layers_.size())  // a training forward since
    for (size_t l = 0; l < layers_.size(); ++l) {
      if (layer_ran_[l]) continue;
      const std::string prefix = "decoder.layers." + std::to_string(l) + ".";
      for (const auto& [name, var] : params_.items())
        if (name.rfind(prefix, 0) == 0) out.push_back(name);
    }
  layer_ran_.clear();
  return out;
}

uint64_t TransformerLM::dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const {
  // Distinct for every (update, micro-batch, layer, site): the fields do not overlap (checked).
  return (opt.step << 24) ^ (opt.micro << 16) ^ (static_cast<uint64_t>(layer + 1) << 4) ^ static_cast<uint64_t>(site);
}

Var TransformerLM::add_positions(const Var& x, const Tensor& src, int64_t pos_offset) {
  const auto& c = config_;
  if (c.pos == PosMethod::Sinusoidal) {
    Tensor table = position::sinusoidal_for_tokens(src, c.decoder_embed_dim, c.padding_idx, pos_offset);  // [B, T, C]
    return add(x, Var(table));
  }
  if (c.pos == PosMethod::Learned) {
    Tensor ids = position::make_positions(src, c.padding_idx, pos_offset);  // [B, T]
    const int64_t rows = embed_positions_.weight.shape()[0];
    const int64_t T = src.dim(1) + pos_offset;
    if (T + c.padding_idx + 1 > rows)
      fail_usage("learned positions: a window of " + std::to_string(T) + " tokens needs positions up to " +
                     std::to_string(T + c.padding_idx) + ", but the table has " + std::to_string(rows) +
                     " rows (max_target_positions = " + std::to_string(c.max_target_positions) + ")",
                 "learned position embeddings cannot extrapolate past their training length (the published "
                 "failure); evaluate with --tokens-per-sample <= " +
                     std::to_string(c.max_target_positions) + " or train with --pos alibi");
    return add(x, embed_positions_(ids));
  }
  return x;
}

std::unique_ptr<SegmentState> TransformerLM::new_segment_state(SegmentUse use) const {
  if (use == SegmentUse::Training)
    return config_.mem_len > 0 ? std::make_unique<HiddenMemory>(config_.decoder_layers, config_.mem_len) : nullptr;
  if (use == SegmentUse::Memory && (config_.pos == PosMethod::Sinusoidal || config_.pos == PosMethod::Learned))
    fail_usage(std::string("--kv-cache: needs a relative position method (alibi, t5, rope, none); this model uses ") +
                   pos_method_name(config_.pos),
               "evaluate absolute-position models with the window protocol (--context-window)");
  return std::make_unique<KvCache>();
}

Var TransformerLM::features(const Tensor& src, const ForwardOptions& opt) {
  const auto& c = config_;
  STRETCH_CHECK(src.rank() == 2, "features: src must be [B, T], got " << src.shape().str());
  const bool train = opt.mode == Mode::Train;
  KvCache* cache = nullptr;
  HiddenMemory* memory = nullptr;  // --mem-len: the inputs of every layer for the earlier tokens
  if (opt.state) {
    cache = dynamic_cast<KvCache*>(opt.state);
    memory = dynamic_cast<HiddenMemory*>(opt.state);
    STRETCH_CHECK(cache || memory, "features: the segment state was not made by this transformer_lm");
  }
  STRETCH_CHECK(!cache || opt.mode == Mode::Eval, "incremental decoding is evaluation only");
  if (train && opt.micro >= kMaxMicro)
    fail_usage("--update-freq " + std::to_string(opt.micro + 1) + ": at most " + std::to_string(kMaxMicro) +
                   " micro-batches per update have distinct dropout masks",
               "use --update-freq <= " + std::to_string(kMaxMicro) + " (or a larger --max-tokens)");
  const int64_t pos_offset = cache ? cache->length : 0;
  // Slope warm-up: training at update u uses w(u)·slopes; evaluation the target slopes.
  const float factor = train ? alibi_warmup_factor(c, opt.step) : 1.f;
  for (auto* a : alibi_layers_) a->set_factor(factor);
  if (cache && cache->layers.empty()) cache->layers.resize(layers_.size());
  Tensor key_padding = cache ? Tensor() : position::key_padding_mask(src, c.padding_idx);  // undefined when no pad
  const Tensor segment_padding = key_padding;                                                 // [B, T] U8
  const int64_t B = src.dim(0);
  const int64_t S = memory ? memory->kept() : 0;  // memory rows before the segment's queries
  if (memory) {
    memory->check_rows(B);
    key_padding = memory->key_padding(segment_padding, B, src.dim(1));  // [B, S + T]
  }
  std::vector<Tensor> layer_inputs;  // [L] of [B, T, C]: the memory's next rows
  const float embed_scale = c.no_scale_embedding ? 1.0f : std::sqrt(static_cast<float>(c.decoder_embed_dim));
  if (adaptive_) adaptive_->set_dropout_stream(opt.seed, dropout_stream(opt, c.decoder_layers, 0));
  Var x = c.adaptive_input ? adaptive_input_(src, embed_scale) : embed_tokens_(src, embed_scale);  // [B, T, input]
  if (project_in_.weight.defined()) x = project_in_(x);                                             // [B, T, C]
  x = add_positions(x, src, pos_offset);
  if (layernorm_embedding_.defined()) x = layernorm_embedding_(x);  // [B, T, C]
  x = dropout(x, {.p = train ? c.dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, -1, 0)});
  const int64_t T = src.dim(1);
  STRETCH_CHECK(opt.last_block_queries == 0 || (!autograd::grad_enabled() && !cache && !memory),
                "last_block_queries is for evaluation without grad, cache or memory");
  const int64_t last_queries = opt.last_block_queries > 0 ? std::min(opt.last_block_queries, T) : T;
  // LayerDrop (fairseq's LayerDropModuleList): one uniform draw per block and training forward, the
  // block runs iff u > p; the draws are a function of (seed, update, micro-batch), as dropout's masks.
  std::vector<bool> skip(layers_.size(), false);
  if (train && c.decoder_layerdrop > 0.f) {
    Rng draws(opt.seed, dropout_stream(opt, -1, kLayerDropSite));
    for (size_t l = 0; l < layers_.size(); ++l) skip[l] = !(draws.uniform() > c.decoder_layerdrop);
  }
  if (train) layer_ran_.resize(layers_.size(), false);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto index = static_cast<int64_t>(l);
    if (skip[l]) continue;
    if (train) layer_ran_[l] = true;
    if (memory) layer_inputs.push_back(x.value().clone());
    // With memory the block sees [memory_l ‖ x] and returns the segment's T rows only.
    const Var block_in = S > 0 ? concat_time(memory->layer(index), x) : x;  // [B, S + T, C]
    x = layers_[l](block_in, {.key_padding = key_padding,
                       .dropout = train ? c.dropout : 0.f,
                       .attention_dropout = train ? c.attention_dropout : 0.f,
                       .activation_dropout = train ? c.activation_dropout : 0.f,
                       .seed = opt.seed,
                       .streams = {dropout_stream(opt, index, 1), dropout_stream(opt, index, 2),
                                   dropout_stream(opt, index, 3), dropout_stream(opt, index, 4)},
                       .kv = cache ? &cache->layers[l] : nullptr,
                       .pos0 = pos_offset,
                       .queries = l + 1 == layers_.size() ? last_queries : T,
                       .memory_rows = S},
                   train ? opt.activations : Activations::Keep);
  }
  if (final_norm_.defined()) x = final_norm_(x);
  if (project_out_.weight.defined()) x = project_out_(x);  // [B, T, output]
  if (cache) cache->length += src.dim(1);
  if (memory) memory->update(layer_inputs, segment_padding, B, T);
  return x;
}

int64_t TransformerLM::parameter_count(const TransformerLMConfig& c) {
  c.validate();
  const int64_t C = c.decoder_embed_dim, V = c.vocab_size, F = c.decoder_ffn_embed_dim;
  const int64_t in = c.input_dim(), out = c.output_dim();
  int64_t n = 0;
  auto bands_of = [&](const std::vector<int64_t>& cut) { return nn::VocabBands::make(cut, V); };
  if (c.adaptive_input) {
    const nn::VocabBands b = bands_of(c.input_cutoffs());
    for (int64_t i = 0; i < b.count(); ++i) {
      const int64_t d = nn::VocabBands::dim(in, c.adaptive_input_factor, i);
      n += b.size(i) * d + C * d;  // table + projection
    }
  } else {
    n += V * in;
  }
  if (c.has_project_in()) n += in * C;
  if (c.has_project_out()) n += C * out;
  if (c.pos == PosMethod::Learned) n += (c.max_target_positions + c.padding_idx + 1) * C;
  if (c.layernorm_embedding) n += 2 * C;
  if (c.pos == PosMethod::T5) n += c.t5_num_buckets * c.decoder_attention_heads;
  // per block: q, k, v, out (weights + biases), two LayerNorms, fc1, fc2
  n += c.decoder_layers * (4 * (C * C + C) + 2 * 2 * C + (C * F + F) + (F * C + C));
  // NormFormer: c_attn [H], attn_ln [C] x 2, ffn_layernorm [F] x 2, w_resid [C]
  n += c.decoder_layers * ((c.scale_heads ? c.decoder_attention_heads : 0) + (c.scale_attn ? 2 * C : 0) +
                           (c.scale_fc ? 2 * F : 0) + (c.scale_resids ? C : 0));
  if (c.has_final_norm()) n += 2 * C;
  if (c.has_adaptive_softmax()) {
    const nn::VocabBands b = bands_of(c.softmax_cutoffs());
    const int64_t k = b.count();
    n += c.tie_adaptive_weights ? (k - 1) * out : (b.size(0) + k - 1) * out;
    for (int64_t i = 1; i < k; ++i) {
      const int64_t d = c.tie_adaptive_weights ? nn::VocabBands::dim(in, c.adaptive_input_factor, i)
                                               : nn::VocabBands::dim(out, c.adaptive_softmax_factor, i);
      if (!(c.tie_adaptive_weights && c.tie_adaptive_proj)) n += d * out;
      if (!c.tie_adaptive_weights) n += b.size(i) * d;
    }
  } else if (!c.share_decoder_input_output_embed) {
    n += V * out;
  }
  return n;
}

}  // namespace stretch::models
