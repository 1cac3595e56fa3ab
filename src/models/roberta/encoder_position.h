// models/roberta/encoder_position.h — the encoder's attention strategies: every key visible
// (ops::AttentionMask::Bidirectional) with symmetric ALiBi −m_h·|i − j| inside the fused kernel
// (ops::BiasPolicy::AlibiSym), or with no score bias (sinusoidal, learned, none: positions act on
// the embeddings or not at all). Key padding still hides pad keys (set by the caller).
#pragma once
#include "nn/self_attention.h"

namespace stretch::models {

class SymmetricAlibi final : public nn::AttentionPosition {
 public:
  // slopes [H]; slope_scale: position interpolation (L_train / L_eval, 1 in training).
  SymmetricAlibi(autograd::Var slopes, float slope_scale) : slopes_(std::move(slopes)), slope_scale_(slope_scale) {}
  void set_bias(autograd::AttentionInputs& in) const override;

 private:
  autograd::Var slopes_;
  float slope_scale_ = 1.f;
};

class BidirectionalNoBias final : public nn::AttentionPosition {
 public:
  void set_bias(autograd::AttentionInputs& in) const override;
};

}  // namespace stretch::models
