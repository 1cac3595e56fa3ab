// models/transformer_lm/transformer_lm.h — fairseq's decoder-only transformer_lm with every
// position method, as a composition of nn modules (nn/linear.h, nn/decoder_block.h) behind
// models::LanguageModel.
// Contract: parameters carry fairseq state-dict names (decoder.embed_tokens.weight, ...);
// init follows fairseq (REFERENCE.md §2.3); forward matches fairseq's TransformerDecoder
// (embedding · sqrt(C), positions, dropout, pre/post-norm blocks, optional final norm, tied or
// untied output through nn::SoftmaxHead; or, with adaptive_input / adaptive_softmax_cutoff, fairseq's
// AdaptiveInput (decoder.embed_tokens.embeddings.*) and AdaptiveSoftmax (decoder.adaptive_softmax.*,
// registered after the blocks and the final norm, as fairseq's state dict has them). Segment state: the KV cache (Decode, and Memory for
// relative position methods); with --mem-len M > 0, SegmentUse::Training gives XL-style memory
// (hidden_memory.h: each layer's inputs of the last M tokens, detached), else none.
// ALiBi variants (alibi_variants.h): learnable slopes are decoder.layers.N.self_attn.alibi_slopes [H],
// registered after every other parameter.
// Dropout masks: stream (step << 24) ^ (micro << 16) ^ ((layer + 1) << 4) ^ site, which is
// distinct for every (update, micro, layer, site) only while micro < 256, layer + 1 < 4096 and
// site < 16; the constructor and features() refuse what would make two masks collide.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/language_model.h"
#include "models/transformer_lm/config.h"
#include "nn/adaptive_input.h"
#include "nn/adaptive_softmax.h"
#include "nn/decoder_block.h"
#include "nn/softmax_head.h"
#include "position/attention_position.h"

namespace stretch::models {

// Keys and values of earlier tokens for incremental decoding: per layer k, v [B, H, S, D].
class KvCache final : public SegmentState {
 public:
  std::vector<nn::LayerKv> layers;
  int64_t length = 0;  // tokens consumed (positions continue from here)
  int64_t position() const override { return length; }
  int64_t kept() const override { return layers.empty() ? 0 : layers[0].k.dim(2); }
  void keep_last(int64_t memory) override;
};

class TransformerLM final : public LanguageModel {
 public:
  explicit TransformerLM(TransformerLMConfig config);
  void init(uint64_t seed) override;  // fairseq initialisation from a seed
  void after_step() override;         // --alibi-positive-slopes: clamp learnable slopes to >= 0
  std::vector<std::string> take_unused_params() override;  // --decoder-layerdrop: the blocks no forward ran

  const TransformerLMConfig& config() const { return config_; }
  ModelInfo info() const override;
  nlohmann::json config_json() const override { return config_.to_json(); }
  nn::ParameterList& params() override { return params_; }
  const nn::ParameterList& params() const override { return params_; }

  // src [B, T] I32 -> hidden states [B, T, C] after the last block (and final norm).
  Var features(const Tensor& src, const ForwardOptions& opt) override;
  const nn::OutputHead& head() const override { return *head_; }
  // fairseq's parameter count of a config without allocating the model (tests, `stretch info`).
  static int64_t parameter_count(const TransformerLMConfig& config);
  std::unique_ptr<SegmentState> new_segment_state(SegmentUse use) const override;
  bool can_recompute_activations() const override { return true; }  // every --pos, --mem-len, adaptive
  // logits [.., V] of hidden [.., C] (adaptive softmax: log-probabilities [N, V], no gradient);
  // forward = output(features) (tests and benchmarks)
  Var output(const Var& hidden) const {
    return softmax_ ? softmax_->logits(hidden) : Var(adaptive_->log_scores(hidden.value()));
  }
  Var forward(const Tensor& src, const ForwardOptions& opt) { return output(features(src, opt)); }

 private:
  Var add_positions(const Var& x, const Tensor& src, int64_t pos_offset);
  uint64_t dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const;

  TransformerLMConfig config_;
  nn::ParameterList params_;
  nn::Embedding embed_tokens_, embed_positions_;
  nn::LayerNorm layernorm_embedding_;  // --layernorm-embedding [C]
  nn::AdaptiveInput adaptive_input_;  // when config_.adaptive_input
  Var t5_table_;
  // One strategy per layer (ALiBi variants give each layer its own slopes; a hybrid stack's
  // upper layers share one rope/t5/none strategy).
  std::vector<std::unique_ptr<nn::AttentionPosition>> positions_;
  std::vector<position::AlibiBias*> alibi_layers_;  // the ALiBi strategies among positions_ (warm-up)
  std::vector<Var> alibi_slopes_;                   // [H] per ALiBi layer: learnable slopes (else empty)
  std::vector<nn::DecoderBlock> layers_;
  // [L] since the last take_unused_params(): a training forward ran block l (empty: no training forward)
  std::vector<bool> layer_ran_;
  nn::LayerNorm final_norm_;
  nn::Linear project_in_, project_out_;  // decoder.project_in_dim / project_out_dim (input / output dim ≠ C)
  nn::Linear output_projection_;
  std::unique_ptr<nn::OutputHead> head_;
  nn::SoftmaxHead* softmax_ = nullptr;       // head_ when it is the full softmax
  nn::AdaptiveSoftmax* adaptive_ = nullptr;  // head_ when it is the adaptive softmax
};

}  // namespace stretch::models
