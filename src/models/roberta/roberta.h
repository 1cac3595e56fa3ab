// models/roberta/roberta.h — a RoBERTa-style bidirectional encoder (fairseq 0.12.2's
// RobertaModel: TransformerEncoder + RobertaLMHead) behind models::LanguageModel.
// Contract: parameters carry fairseq's state-dict names under encoder.sentence_encoder.
// (embed_tokens.weight [V, C], embed_positions.weight for learned positions, layernorm_embedding,
// layers.N.{self_attn.{k,v,q,out}_proj, self_attn_layer_norm, fc1, fc2, final_layer_norm},
// layer_norm when pre-norm) then encoder.lm_head.{bias, dense, layer_norm} (its weight is the
// token embedding, listed once); learnable ALiBi slopes
// encoder.sentence_encoder.layers.N.self_attn.alibi_slopes [H] come last. init() is fairseq's
// init_bert_params: Linear and Embedding weights N(0, 0.02), biases 0, pad rows 0, LayerNorm 1/0,
// the head's bias 0 (slopes from ops::alibi_slopes). features(src [B, T]) -> [B, T, C]:
//   x = embed_tokens(src) (+ positions), layernorm_embedding, dropout, L blocks (post-norm by
//   default: x = LN(x + drop(attn(x))), x = LN(x + drop(ffn(x)))), final LayerNorm if pre-norm;
// attention sees every non-pad key, with −m_h·|i − j| for --pos alibi. head() is RobertaLmHead
// (lm_head.h). Unlike fairseq, pad positions' outputs are not zeroed after the embedding: pad keys
// are hidden from attention and pad targets are never scored, so no scored number depends on them.
// Dropout masks: stream (step << 24) ^ (micro << 16) ^ ((layer + 1) << 4) ^ site, as transformer_lm.
// No segment state: an encoder has no KV cache or memory (new_segment_state refuses with a usage error).
#pragma once
#include <memory>
#include <vector>

#include "models/language_model.h"
#include "models/roberta/config.h"
#include "models/roberta/lm_head.h"
#include "nn/decoder_block.h"

namespace stretch::models {

class RobertaEncoder final : public LanguageModel {
 public:
  explicit RobertaEncoder(RobertaConfig config);
  ModelInfo info() const override;
  nlohmann::json config_json() const override { return config_.to_json(); }
  nn::ParameterList& params() override { return params_; }
  const nn::ParameterList& params() const override { return params_; }
  void init(uint64_t seed) override;
  Var features(const Tensor& src, const ForwardOptions& opt) override;
  const nn::OutputHead& head() const override { return head_; }
  std::unique_ptr<SegmentState> new_segment_state(SegmentUse use) const override;
  bool can_recompute_activations() const override { return true; }
  const RobertaConfig& config() const { return config_; }
  const RobertaLmHead& lm_head() const { return head_; }

 private:
  uint64_t dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const;

  RobertaConfig config_;
  nn::ParameterList params_;
  nn::Embedding embed_tokens_, embed_positions_;
  nn::LayerNorm layernorm_embedding_, final_norm_;
  std::vector<std::unique_ptr<nn::AttentionPosition>> positions_;  // one per layer
  std::vector<Var> slopes_;                                        // [H] per layer when learnable
  std::vector<nn::DecoderBlock> layers_;
  RobertaLmHead head_;
};

}  // namespace stretch::models
