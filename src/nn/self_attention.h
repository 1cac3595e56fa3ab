// nn/self_attention.h — multi-head causal self-attention with the position method as a strategy.
// Contract: xq [B, Tq, C] are the last Tq positions of xkv [B, T, C] (Tq = T except when the
// last block computes only the scored rows); the result is [B, Tq, C] = out_proj(attention).
// Parameters (fairseq names under `prefix`): k_proj, v_proj, q_proj, out_proj (weight, bias);
// q, k, v are row views of one [3C, C] weight and [3C] bias so a single GEMM projects all
// three (used whenever the strategy does not rotate q/k, no cache is given and Tq = T); with
// Tq < T (memory, or the scored rows in evaluation) one GEMM projects q from xq and one k, v from
// xkv, and attention reads both in place.
// AttentionPosition says how a position method enters attention: a score bias inside the fused
// kernel (ALiBi, T5; position/attention_position.h) and/or a rotation of q and k (rotary). With
// a LayerKv cache the keys/values of earlier calls precede this call's (positions pos0 ...).
#pragma once
#include <cstdint>
#include <string>

#include "autograd/attention.h"
#include "nn/linear.h"

namespace stretch::nn {

class AttentionPosition {
 public:
  virtual ~AttentionPosition() = default;
  // Sets the score bias of the fused kernel (policy, its parameters, window, ...).
  virtual void set_bias(autograd::AttentionInputs& in) const = 0;
  // True when rotate() changes q and k (then q, k, v are projected separately).
  virtual bool rotates() const { return false; }
  // q [B, H, Tq, D] at positions q_pos0 .., k [B, H, S, D] at positions k_pos0 ..
  virtual void rotate(Var& q, Var& k, int64_t q_pos0, int64_t k_pos0) const {}
};

// Keys and values of the tokens before this call, per layer: [B, H, S, D] each.
struct LayerKv {
  Tensor k, v;
};

struct AttentionCall {
  const Tensor& key_padding;  // U8 [B, T] (1 = pad) or undefined
  float dropout = 0.f;        // attention dropout (0 in evaluation)
  uint64_t seed = 0, stream = 0;
  LayerKv* kv = nullptr;      // incremental decoding (evaluation only)
  int64_t pos0 = 0;           // position of xkv's first row (the cached length)
  int64_t detached = 0;       // xkv's first rows of each batch are a memory nobody differentiates
                              // (its input gradient is skipped: transformer_lm --mem-len, post-norm)
};

class SelfAttention {
 public:
  SelfAttention() = default;
  SelfAttention(ParameterList& params, const std::string& prefix, int64_t dim, int64_t heads,
                const AttentionPosition* position);
  Var operator()(const Var& xq, const Var& xkv, const AttentionCall& call) const;

  Linear k_proj, v_proj, q_proj, out_proj;
  Var qkv_weight, qkv_bias;  // [3C, C], [3C]: rows q; k; v (the three projections are views)

 private:
  int64_t heads_ = 0, head_dim_ = 0;
  const AttentionPosition* position_ = nullptr;
};

}  // namespace stretch::nn
