// nn/decoder_block.h — a Transformer decoder block (fairseq's TransformerDecoderLayer), pre- or
// post-norm:
//   pre:  x = x + drop(attn(LN(x)));  x = x + drop(ffn(LN(x)))
//   post: x = LN(x + drop(attn(x)));  x = LN(x + drop(ffn(x)))
// Parameters under `prefix` (decoder.layers.N.): self_attn.*, self_attn_layer_norm.*, fc1.*,
// fc2.*, final_layer_norm.*, registered in that order.
// NormFormer (fairseq 0.12.2's TransformerDecoderLayerBase, flags --scale-heads/-attn/-fc/-resids),
// each optional, registered where fairseq's named_parameters() lists them (c_attn, w_resid first,
// attn_ln after self_attn, ffn_layernorm before fc1):
//   h = attn(..)  (after out_proj);  h = h · c_attn[c / D]  (c_attn [H]: fairseq scales the D-channel
//   groups of the projected output, not the heads before out_proj);  h = attn_ln(h)  [C];
//   x = x + drop(h);  ...;  FFN: fc2(ffn_layernorm(drop(act(fc1(.)))))  [F];
//   x = w_resid · x + drop(ffn)  (w_resid [C]: the FFN's residual only). The caller gives the four dropout
// streams (attention probabilities, attention output, activations, FFN output) so masks stay
// the family's to number. `queries` < T: the block outputs only the last `queries` positions
// (keys and values still come from all T): the scored rows in evaluation, or the current segment
// when x = [memory ‖ segment] (transformer_lm --mem-len; differentiable in the segment's rows).
#pragma once
#include <array>

#include "autograd/checkpoint.h"
#include "nn/feed_forward.h"
#include "nn/self_attention.h"

namespace stretch::nn {

struct BlockConfig {
  int64_t dim = 0, ffn_dim = 0, heads = 0;  // C, F, H
  bool normalize_before = true;
  ops::Activation activation = ops::Activation::Relu;
  bool scale_heads = false, scale_attn = false, scale_fc = false, scale_resids = false;  // NormFormer
};

struct BlockCall {
  const Tensor& key_padding;             // U8 [B, T] or undefined
  float dropout = 0.f, attention_dropout = 0.f, activation_dropout = 0.f;  // 0 in evaluation
  uint64_t seed = 0;
  std::array<uint64_t, 4> streams{};     // attention probs, attention out, activations, FFN out
  LayerKv* kv = nullptr;
  int64_t pos0 = 0;
  int64_t queries = 0;                   // 0: all positions
  int64_t memory_rows = 0;               // x's first rows of each batch are a detached memory (post-norm
                                         // blocks skip their input gradient; pre-norm ones need it for
                                         // the LayerNorm's parameters)
};

class DecoderBlock {
 public:
  DecoderBlock(ParameterList& params, const std::string& prefix, const BlockConfig& config,
               const AttentionPosition* position);
  Var operator()(const Var& x, const BlockCall& call) const;  // x [B, T, C] -> [B, queries, C]
  // NormFormer's parameters at fairseq's init: c_attn and w_resid 1, the LayerNorms 1 / 0 (no draw).
  void init_normformer();
  // The same block; with Activations::Recompute (--checkpoint-activations, training) as one
  // autograd::checkpoint entry that keeps only x and recomputes the block in backward, with the
  // same dropout masks (the call's seed and streams). call.kv must be null there.
  Var operator()(const Var& x, const BlockCall& call, autograd::Activations activations) const;

  Var c_attn;   // [H] --scale-heads, else undefined
  Var w_resid;  // [C] --scale-resids, else undefined
  SelfAttention self_attn;
  LayerNorm attn_ln;  // [C] --scale-attn, else undefined
  LayerNorm self_attn_layer_norm;
  FeedForward ffn;
  LayerNorm final_layer_norm;

 private:
  bool normalize_before_ = true;
};

// The last n positions of x [B, T, C]: [B, n, C] (x itself when n = T; autograd::last_time).
Var last_positions(const Var& x, int64_t n);

}  // namespace stretch::nn
