// models/roberta/roberta.cpp — see roberta.h.
#include "models/roberta/roberta.h"

#include <string>

#include "autograd/functions.h"
#include "core/rng.h"
#include "models/roberta/encoder_position.h"
#include "ops/alibi.h"
#include "position/positions.h"

namespace stretch::models {

using namespace stretch::autograd;

namespace {
constexpr uint64_t kMaxMicro = 1u << 8;
constexpr float kBertStd = 0.02f;  // init_bert_params
}  // namespace

RobertaEncoder::RobertaEncoder(RobertaConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto& c = config_;
  const int64_t C = c.encoder_embed_dim, V = c.vocab_size, H = c.encoder_attention_heads;
  const std::string p = "encoder.sentence_encoder.";
  embed_tokens_ = nn::Embedding::make(params_, p + "embed_tokens.weight", V, C);  // [V, C]
  if (c.pos == EncoderPos::Learned)
    embed_positions_ = nn::Embedding::make(params_, p + "embed_positions.weight", c.max_positions + c.padding_idx + 1, C);
  layernorm_embedding_ = nn::LayerNorm::make(params_, p + "layernorm_embedding.", C);
  for (int64_t l = 0; l < c.encoder_layers; ++l) {
    if (c.pos == EncoderPos::Alibi) {
      Var m = alibi_slopes_var(H, c.alibi_learnable_slopes);  // [H] the paper's slopes (ops::alibi_slopes)
      if (c.alibi_learnable_slopes) slopes_.push_back(m);
      positions_.push_back(std::make_unique<SymmetricAlibi>(m, c.alibi_slope_scale));
    } else {
      positions_.push_back(std::make_unique<BidirectionalNoBias>());
    }
  }
  const nn::BlockConfig block{.dim = C,
                              .ffn_dim = c.encoder_ffn_embed_dim,
                              .heads = H,
                              .normalize_before = c.encoder_normalize_before,
                              .activation = c.activation_fn};
  layers_.reserve(static_cast<size_t>(c.encoder_layers));
  for (int64_t l = 0; l < c.encoder_layers; ++l)
    layers_.emplace_back(params_, p + "layers." + std::to_string(l) + ".", block, positions_[static_cast<size_t>(l)].get());
  if (c.encoder_normalize_before) final_norm_ = nn::LayerNorm::make(params_, p + "layer_norm.", C);
  head_ = RobertaLmHead(params_, "encoder.lm_head.", embed_tokens_.weight, c.activation_fn);
  for (size_t l = 0; l < slopes_.size(); ++l)
    params_.add(p + "layers." + std::to_string(l) + ".self_attn.alibi_slopes", slopes_[l]);
}

ModelInfo RobertaEncoder::info() const {
  const auto& c = config_;
  std::string summary = c.arch + " pos=" + encoder_pos_name(c.pos) + (c.pos == EncoderPos::Alibi ? " (symmetric)" : "");
  if (c.alibi_learnable_slopes) summary += " learnable-slopes";
  return {.arch = c.arch,
          .family = "roberta",
          .vocab_size = c.vocab_size,
          .padding_idx = c.padding_idx,
          .tokens_per_sample = c.tokens_per_sample,
          .label = encoder_pos_name(c.pos),
          .summary = summary};
}

void RobertaEncoder::init(uint64_t seed) {
  const auto& c = config_;
  const int64_t C = c.encoder_embed_dim;
  Rng rng(seed, /*stream=*/0x1418);
  nn::init_normal(embed_tokens_.weight, 0.f, kBertStd, rng);
  std::fill_n(embed_tokens_.weight.data() + c.padding_idx * C, C, 0.f);
  if (embed_positions_.weight.defined()) {
    nn::init_normal(embed_positions_.weight, 0.f, kBertStd, rng);
    std::fill_n(embed_positions_.weight.data() + c.padding_idx * C, C, 0.f);
  }
  layernorm_embedding_.init();
  auto linear = [&](nn::Linear& l) {
    nn::init_normal(l.weight, 0.f, kBertStd, rng);
    nn::init_constant(l.bias, 0.f);
  };
  for (auto& L : layers_) {
    for (nn::Linear* q : {&L.self_attn.k_proj, &L.self_attn.v_proj, &L.self_attn.q_proj, &L.self_attn.out_proj}) linear(*q);
    L.self_attn_layer_norm.init();
    linear(L.ffn.fc1);
    linear(L.ffn.fc2);
    L.final_layer_norm.init();
  }
  if (final_norm_.defined()) final_norm_.init();
  linear(head_.dense);
  head_.layer_norm.init();
  nn::init_constant(head_.bias, 0.f);
  const std::vector<float> m = ops::alibi_slopes(static_cast<int>(c.encoder_attention_heads));
  for (auto& s : slopes_) std::copy(m.begin(), m.end(), s.data());
}

uint64_t RobertaEncoder::dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const {
  return (opt.step << 24) ^ (opt.micro << 16) ^ (static_cast<uint64_t>(layer + 1) << 4) ^ static_cast<uint64_t>(site);
}

std::unique_ptr<SegmentState> RobertaEncoder::new_segment_state(SegmentUse use) const {
  if (use == SegmentUse::Training) return nullptr;
  fail_usage(std::string("the roberta encoder is bidirectional: it has no KV cache or memory (") +
                 (use == SegmentUse::Decode ? "generate" : "--kv-cache") + " needs a decoder)",
             "evaluate it with `stretch eval-lm --task masked_lm` (masked-token perplexity)");
}

Var RobertaEncoder::features(const Tensor& src, const ForwardOptions& opt) {
  const auto& c = config_;
  STRETCH_CHECK(src.rank() == 2, "features: src must be [B, T], got " << src.shape().str());
  STRETCH_CHECK(opt.state == nullptr, "the roberta encoder has no segment state");
  const bool train = opt.mode == Mode::Train;
  if (train && opt.micro >= kMaxMicro)
    fail_usage("--update-freq " + std::to_string(opt.micro + 1) + ": at most " + std::to_string(kMaxMicro) +
                   " micro-batches per update have distinct dropout masks",
               "use --update-freq <= " + std::to_string(kMaxMicro) + " (or a larger --max-tokens)");
  const int64_t T = src.dim(1);
  const Tensor key_padding = position::key_padding_mask(src, c.padding_idx);  // [B, T] U8, undefined when no pad
  Var x = embed_tokens_(src);                                                   // [B, T, C] (no scale: RoBERTa)
  if (c.pos == EncoderPos::Sinusoidal) {
    x = add(x, Var(position::sinusoidal_for_tokens(src, c.encoder_embed_dim, c.padding_idx, 0)));
  } else if (c.pos == EncoderPos::Learned) {
    const int64_t rows = embed_positions_.weight.shape()[0];
    if (T + c.padding_idx + 1 > rows)
      fail_usage("learned positions: a block of " + std::to_string(T) + " tokens needs positions up to " +
                     std::to_string(T + c.padding_idx) + ", but the table has " + std::to_string(rows) +
                     " rows (max_positions = " + std::to_string(c.max_positions) + ")",
                 "learned position embeddings cannot extrapolate past their training length; evaluate with "
                 "--tokens-per-sample <= " + std::to_string(c.max_positions) + " or train with --pos alibi");
    x = add(x, embed_positions_(position::make_positions(src, c.padding_idx, 0)));
  }
  x = layernorm_embedding_(x);
  x = dropout(x, {.p = train ? c.dropout : 0.f, .seed = opt.seed, .stream = dropout_stream(opt, -1, 0)});
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto index = static_cast<int64_t>(l);
    x = layers_[l](x, {.key_padding = key_padding,
                       .dropout = train ? c.dropout : 0.f,
                       .attention_dropout = train ? c.attention_dropout : 0.f,
                       .activation_dropout = train ? c.activation_dropout : 0.f,
                       .seed = opt.seed,
                       .streams = {dropout_stream(opt, index, 1), dropout_stream(opt, index, 2),
                                   dropout_stream(opt, index, 3), dropout_stream(opt, index, 4)}},
                      train ? opt.activations : Activations::Keep);
  }
  if (final_norm_.defined()) x = final_norm_(x);
  return x;  // [B, T, C]
}

}  // namespace stretch::models
