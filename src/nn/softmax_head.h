// nn/softmax_head.h — the full-softmax output head with fairseq's cross_entropy criterion:
// logits = hidden · weight [V, C]ᵀ (+ bias [V] when given: Transformer-XL's out_layers.0, adaptive_span's out_emb; weight may be
// the tied token embedding), summed
// NLL over non-pad targets, sample_size = non-pad targets. Training uses the in-place fused
// cross-entropy (the logits buffer becomes its own gradient: one expf pass per logit).
#pragma once
#include "nn/output_head.h"

namespace stretch::nn {

class SoftmaxHead final : public OutputHead {
 public:
  explicit SoftmaxHead(Var weight, Var bias = Var()) : weight_(std::move(weight)), bias_(std::move(bias)) {}
  int64_t vocab_size() const override { return weight_.shape()[0]; }
  HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const override;
  void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets, float* nll,
                  int64_t chunk_rows = 0) const override;
  Tensor log_scores(const Tensor& hidden) const override;
  // logits [.., V] (recorded on the tape when grad is on)
  Var logits(const Var& hidden) const;

 private:
  Var weight_;  // [V, C]
  Var bias_;    // [V] or undefined (fairseq's transformer_lm has none; adaptive_span's out_emb has one)
};

}  // namespace stretch::nn
