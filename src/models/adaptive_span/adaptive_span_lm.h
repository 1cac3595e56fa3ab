// models/adaptive_span/adaptive_span_lm.h — fairseq's examples/adaptive_span model
// (AdaptiveSpanTransformer → TransformerSeq; REFERENCE.md §5, the port's behaviour by default)
// behind models::LanguageModel.
// Contract:
//   * Parameters carry fairseq 0.12.2's state-dict names and order: decoder.model.in_emb.weight [V, C],
//     out_emb.{weight [V, C], bias [V]}, key_pe [1, D, L], then per layer l: layers.l.attn.attn.
//     adaptive_span._mask.current_val [H, 1, 1] ([1] with adapt_span_layer), attn.proj_{query,out,val,
//     key}.weight [C, C] (no bias), norm1.{weight,bias}, ff.fc1.{weight [F, C], bias}, ff.fc2.{weight
//     [C, F], bias}, norm2.{weight,bias}. init() draws fairseq's initialisers (§5; see the .cpp).
//   * features(src [B, M]) -> [B, M, C]: h = emb_dropout(in_emb[src]) (no √C scale, no positions);
//     per layer, in fairseq's order: the layer's trim_len and next cache size from its z AS IT IS
//     (span_sizes.h), the next cache (detached rows of [cache ‖ h_in]), then z clamped into [0, 1]
//     (adapt_span_clamp forward, the port), keys = [trimmed / zero-padded cache (S rows) ‖ h],
//     span_attention (span_attention.h), post-norm h = LN1(h + W_out·attn), h = LN2(h + FFN(h));
//     finally emb_dropout again (then the last options.last_block_queries rows when given). The
//     cache is the SpanCache of options.state (a fresh zero cache of get_cache_size() rows per
//     layer when none is given or it is empty).
//   * head(): out_emb (with bias) and the adaptive_span_loss criterion: summed NLL over non-pad
//     targets with sample_size = B·M (fairseq's loss / ntokens under truncated_bptt_lm).
//   * aux_loss(): aux_loss_scaler · Σ_l L·mean(z_l) of the z the last forward used, times B·M of
//     that forward, so that after train_update()'s division by the sample size B·M the gradient is
//     fairseq's ∇(loss / ntokens + aux) (its criterion returns sample_size 1). The logged loss
//     excludes it (train_update logs the head's loss).
//   * after_step(): adapt_span_clamp after_step (the original) clamps every z into [0, 1].
//   * train_metrics(): fairseq's avg_span and max_span of the last forward (span_sizes.h).
//   * Segment state: SpanCache for SegmentUse::Training (train, valid, eval-lm's truncated_bptt_lm);
//     validation continues the training cache and training continues from where validation left it
//     (validation_shares_segment_state: fairseq's AdaptiveSpanDecoder keeps one `_mems`);
//     Decode and Memory are usage errors (no generation; evaluate with --task truncated_bptt_lm).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/adaptive_span/config.h"
#include "models/adaptive_span/span_sizes.h"
#include "models/language_model.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/softmax_head.h"

namespace stretch::models {

// out_emb with fairseq's adaptive_span_loss: the full softmax's summed NLL, sample_size B·M.
class SpanLossHead final : public nn::OutputHead {
 public:
  SpanLossHead(Var weight, Var bias) : softmax_(std::move(weight), std::move(bias)) {}
  int64_t vocab_size() const override { return softmax_.vocab_size(); }
  nn::HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, nn::LossUse use) const override;
  void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets, float* nll,
                  int64_t chunk_rows = 0) const override {
    softmax_.target_nll(hidden, rows, targets, nll, chunk_rows);
  }
  Tensor log_scores(const Tensor& hidden) const override { return softmax_.log_scores(hidden); }

 private:
  nn::SoftmaxHead softmax_;
};

class AdaptiveSpanLM final : public LanguageModel {
 public:
  explicit AdaptiveSpanLM(AdaptiveSpanConfig config);
  ModelInfo info() const override;
  nlohmann::json config_json() const override { return config_.to_json(); }
  nn::ParameterList& params() override { return params_; }
  const nn::ParameterList& params() const override { return params_; }
  void init(uint64_t seed) override;
  Var features(const Tensor& src, const ForwardOptions& options) override;
  const nn::OutputHead& head() const override { return *head_; }
  Var aux_loss() override;
  void after_step() override;
  std::vector<std::pair<std::string, double>> train_metrics() const override;
  bool validation_shares_segment_state() const override { return true; }
  std::unique_ptr<SegmentState> new_segment_state(SegmentUse use) const override;

  const AdaptiveSpanConfig& config() const { return config_; }
  // The sizes the last forward used per layer (tests).
  struct LayerSizes {
    int64_t trim_len = 0, cache_size = 0, span = 0, cache_rows_in = 0;
  };
  const std::vector<LayerSizes>& last_sizes() const { return last_sizes_; }

 private:
  struct Layer {
    Var z;  // [H, 1, 1] or [1]
    nn::Linear proj_query, proj_out, proj_val, proj_key;
    nn::LayerNorm norm1;
    nn::FeedForward ff;
    nn::LayerNorm norm2;
  };
  uint64_t dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const;
  adaptive_span::SpanShape shape() const { return {.attn_span = config_.attn_span, .ramp = config_.adapt_span_ramp}; }

  AdaptiveSpanConfig config_;
  nn::ParameterList params_;
  nn::Embedding in_emb_;
  Var out_weight_, out_bias_;
  Var key_pe_;  // [1, D, L]
  std::vector<Layer> layers_;
  std::unique_ptr<nn::OutputHead> head_;
  std::vector<LayerSizes> last_sizes_;
  int64_t last_rows_ = 0;  // B·M of the last forward
  double avg_span_ = 0, max_span_ = 0;
};

}  // namespace stretch::models
