// autograd/attention.h — the differentiable wrapper of the fused attention op (ops/attention.h).
// Contract: q [B, H, T, D], k/v [B, H, S, D] (S ≥ T, query i at key position S−T+i); the result
// is [B, H, T, D]. AttentionInputs carries the whole ops policy unchanged: the mask (Causal or
// Bidirectional), BiasPolicy (None, Alibi, AlibiSym, T5), AlibiShape and cap, slope_scale, window,
// key padding and dropout; scores are scale · q·k + bias exactly as ops/attention.h defines them.
// The bias parameters are Vars owned by the caller, never by this layer (no process-global state):
//   slopes   [H]      Alibi/AlibiSym. Build it with alibi_slopes_var(H) (ops::alibi_slopes, the
//                     one slope function). requires_grad false: fixed slopes, no gradient; true:
//                     a learnable parameter, ∂L/∂slopes (raw, before slope_scale) += its grad.
//   t5_table [NB, H]  T5. requires_grad true: ∂L/∂table += its grad.
// The parameter of a policy not selected is ignored; a missing or mis-shaped one for the selected
// policy throws stretch::Error naming the field. Gradients flow to q, k, v and the selected
// policy's parameter. The log-sum-exp saved by the forward is the only attention state kept for
// backward (memory O(T) per head); the parameter Vars are kept alive by the tape until backward.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "autograd/var.h"
#include "ops/attention.h"
#include "tensor/tensor.h"

namespace stretch::autograd {

struct AttentionInputs {
  ops::AttentionMask mask = ops::AttentionMask::Causal;  // Bidirectional: every key visible
  ops::BiasPolicy bias = ops::BiasPolicy::None;
  float scale = 0.0f;            // score scale; 0 means 1/sqrt(D) (ops::attention_scale)
  // Alibi / AlibiSym: bias −slopes[h] · slope_scale · f(distance), f by alibi_shape.
  Var slopes;                    // [H]: constant (fixed slopes) or a learnable parameter
  float slope_scale = 1.0f;      // position interpolation factor (L_train / L_eval)
  ops::AlibiShape alibi_shape = ops::AlibiShape::Linear;
  float alibi_cap = 0.0f;        // AlibiShape::Clipped: distances beyond cap count as cap (> 0)
  // T5: bias table[bucket(j − p_i), h].
  Var t5_table;                  // [num_buckets, H]
  int64_t t5_num_buckets = 32;
  int64_t t5_max_distance = 128;
  int64_t window = 0;            // 0: unlimited; composes with every policy
  Tensor key_padding;            // optional U8 [B, S], 1 = padded key; undefined when no padding
  float dropout = 0.0f;          // attention dropout (training only)
  uint64_t seed = 0, stream = 0;
};

// The ALiBi slopes of `heads` heads (ops::alibi_slopes) as a [H] Var; requires_grad makes them a
// learnable parameter. Each call returns a new Var: the caller owns it.
Var alibi_slopes_var(int64_t heads, bool requires_grad = false);

Var attention(const Var& q, const Var& k, const Var& v, const AttentionInputs& in);

// The gradient buffers of inputs that one kernel call writes under a single GradInit (the attention
// op's dq, dk, dv): an input that needs no gradient gets scratch; fresh buffers are overwritten
// (no zero-fill) when all are fresh, otherwise the fresh ones are zeroed and the kernel accumulates.
// For backward closures (it reserves the gradients: Var::grad_for).
struct JointGrads {
  std::vector<float*> ptr;  // one per input, in order
  ops::GradInit init = ops::GradInit::Overwrite;
  std::vector<Tensor> scratch;
};
JointGrads joint_grads(std::initializer_list<const Var*> inputs);
// The same attention read straight from the fused projection qkv [B, T, 3·H·D] (q, k, v blocks of
// H·D channels per row, head h at channels h·D of each block) and written as [B, T, H·D]: no head
// split/merge copies, one gradient buffer [B, T, 3·H·D] for the three inputs (S = T, no cache).
Var attention_qkv(const Var& qkv, int64_t heads, const AttentionInputs& in);

// The same attention with q and kv from two projections: q [B, T, H·D] (the segment's rows), kv
// [B, S, 2·H·D] (k then v blocks of H·D channels per row, over [memory ‖ segment]; S ≥ T, query i
// at key S−T+i), written as [B, T, H·D]; read in place (no head split/merge copies). key_padding
// [B, S]. Gradients flow to q, kv (every S row) and the bias parameter.
Var attention_q_kv(const Var& q, const Var& kv, int64_t heads, const AttentionInputs& in);

// Rotary embedding (rotate-half) on x [B, H, T, D] at positions pos0 .. pos0+T−1.
Var rope(const Var& x, int64_t pos0, float base);

}  // namespace stretch::autograd
