// models/roberta/lm_head.h — fairseq's RobertaLMHead with the masked_lm criterion as one
// nn::OutputHead:
//   logits [.., V] = layer_norm(gelu(dense(x))) · weightᵀ + bias
// with weight the token embedding [V, C] (tied, as RoBERTa's default), dense [C, C] + bias,
// layer_norm over C and bias [V] (fairseq names encoder.lm_head.{dense, layer_norm, bias}).
// loss(): fairseq's masked_lm criterion: the head runs only on the rows whose target is not pad
// (the masked positions; train/masked_lm_data.h puts pad everywhere else), the loss is the summed
// NLL over them and sample_size = their number. target_nll()/log_scores() as nn/output_head.h.
#pragma once
#include "nn/linear.h"
#include "nn/output_head.h"
#include "ops/activation.h"

namespace stretch::models {

using autograd::Var;

class RobertaLmHead final : public nn::OutputHead {
 public:
  RobertaLmHead() = default;
  // Registers dense, layer_norm and bias under `prefix` (encoder.lm_head.); weight is tied.
  RobertaLmHead(nn::ParameterList& params, const std::string& prefix, Var weight, ops::Activation activation);
  int64_t vocab_size() const override { return weight_.shape()[0]; }
  nn::HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, nn::LossUse use) const override;
  void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets, float* nll,
                  int64_t chunk_rows = 0) const override;
  Tensor log_scores(const Tensor& hidden) const override;
  Var logits(const Var& hidden) const;  // hidden [.., C] -> [.., V]

  nn::Linear dense;
  nn::LayerNorm layer_norm;
  Var bias;  // [V]

 private:
  Var weight_;  // [V, C]
  ops::Activation activation_ = ops::Activation::Gelu;
};

}  // namespace stretch::models
