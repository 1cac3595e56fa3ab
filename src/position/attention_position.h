// position/attention_position.h — the position methods that act inside self-attention, as
// nn::AttentionPosition strategies: a score bias in the fused kernel (ALiBi, T5) or a rotation
// of q and k (rotary); NoBias for methods that act on the embeddings (sinusoidal, learned) or
// have no positions. Every strategy carries the evaluation-time window (keys visible iff
// i − j < window; 0: unlimited). The T5 table is the model's parameter, held by reference.
#pragma once
#include <memory>

#include "nn/self_attention.h"

namespace stretch::position {

struct AttentionWindow {
  int64_t window = 0;
};

class NoBias final : public nn::AttentionPosition {
 public:
  explicit NoBias(AttentionWindow w) : w_(w) {}
  void set_bias(autograd::AttentionInputs& in) const override;

 private:
  AttentionWindow w_;
};

// −m_h·f(i − j) (f by AlibiShape: linear, log, clipped at `cap`) with the slopes Var it is given:
// a constant built from ops::alibi_slopes (alibi_slopes_var, or a variant's per-layer slopes) or
// a learnable parameter of the model. The kernel's slope_scale is slope_scale (interpolation at
// evaluation) times the training-time factor set by set_factor() (slope warm-up; 1 by default).
struct AlibiShapeSpec {
  ops::AlibiShape shape = ops::AlibiShape::Linear;
  float cap = 0.f;  // AlibiShape::Clipped: the distance after which the bias is constant
};

class AlibiBias final : public nn::AttentionPosition {
 public:
  AlibiBias(int64_t heads, float slope_scale, AttentionWindow w);  // the paper's slopes, linear
  AlibiBias(autograd::Var slopes, float slope_scale, AlibiShapeSpec shape, AttentionWindow w);
  void set_bias(autograd::AttentionInputs& in) const override;
  void set_factor(float factor) { factor_ = factor; }
  const autograd::Var& slopes() const { return slopes_; }

 private:
  autograd::Var slopes_;  // [H]
  float slope_scale_;
  AlibiShapeSpec shape_;
  AttentionWindow w_;
  float factor_ = 1.f;
};

// table[bucket(j − i), h] from the learned [num_buckets, H] table.
class T5Bias final : public nn::AttentionPosition {
 public:
  T5Bias(autograd::Var table, int64_t num_buckets, int64_t max_distance, AttentionWindow w)
      : table_(std::move(table)), num_buckets_(num_buckets), max_distance_(max_distance), w_(w) {}
  void set_bias(autograd::AttentionInputs& in) const override;

 private:
  autograd::Var table_;
  int64_t num_buckets_, max_distance_;
  AttentionWindow w_;
};

// Rotate-half rotary embedding of q and k at their absolute positions.
class Rotary final : public nn::AttentionPosition {
 public:
  Rotary(float base, AttentionWindow w) : base_(base), w_(w) {}
  void set_bias(autograd::AttentionInputs& in) const override;
  bool rotates() const override { return true; }
  void rotate(autograd::Var& q, autograd::Var& k, int64_t q_pos0, int64_t k_pos0) const override;

 private:
  float base_;
  AttentionWindow w_;
};

}  // namespace stretch::position
