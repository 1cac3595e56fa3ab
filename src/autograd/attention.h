// autograd/attention.h — the differentiable wrapper of the fused attention op (ops/attention.h).
// Contract: q [B, H, T, D], k/v [B, H, S, D] (S ≥ T, query i at key position S−T+i), causal;
// scores scaled by `scale`, plus the score bias; the result is [B, H, T, D]. Gradients flow to
// q, k, v and, for T5, to the bias table [num_buckets, H]. The log-sum-exp saved by the forward
// is the only attention state kept for backward (memory O(T) per head).
#pragma once
#include <cstdint>

#include "autograd/var.h"
#include "tensor/tensor.h"

namespace stretch::autograd {

enum class ScoreBias : uint8_t { None, Alibi, T5 };

struct AttentionInputs {
  ScoreBias bias = ScoreBias::None;
  float scale = 1.0f;            // 1/sqrt(D)
  float slope_scale = 1.0f;      // ALiBi position interpolation factor
  int64_t window = 0;            // 0: unlimited
  Tensor key_padding;            // optional U8 [B, S], 1 = padded key; undefined when no padding
  Var t5_table;                  // [num_buckets, H] when bias == T5
  int64_t t5_num_buckets = 32;
  int64_t t5_max_distance = 128;
  float dropout = 0.0f;          // attention dropout (training only)
  uint64_t seed = 0, stream = 0;
};

Var attention(const Var& q, const Var& k, const Var& v, const AttentionInputs& in);
// The same attention read straight from the fused projection qkv [B, T, 3·H·D] (q, k, v blocks of
// H·D channels per row, head h at channels h·D of each block) and written as [B, T, H·D]: no head
// split/merge copies, one gradient buffer [B, T, 3·H·D] for the three inputs (S = T, no cache).
Var attention_qkv(const Var& qkv, int64_t heads, const AttentionInputs& in);

// Rotary embedding (rotate-half) on x [B, H, T, D] at positions pos0 .. pos0+T−1.
Var rope(const Var& x, int64_t pos0, float base);

}  // namespace stretch::autograd
