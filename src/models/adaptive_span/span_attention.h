// models/adaptive_span/span_attention.h — Adaptive Span's attention (REFERENCE.md §5.3) as one
// differentiable call of the fused attention op (ops/attention.h): positional keys key_pe as the
// op's Shared relative-key term, minimum distance 1, window S + 1 (distances 1..S after trimming)
// and the soft mask of the layer's span parameters z, after the softmax (fairseq's port) or as
// log m before it (the original's renormalisation). No [M, S] matrix and no _skew/_unskew.
// Contract:
//   q [B, M, C]        the block's queries (H heads of D = C/H channels, head h at channels h·D)
//   k, v [B, S + M, C] keys/values of [trimmed cache (S rows) ‖ block (M rows)]; query i sits at
//                      key row S + i and sees rows S + i − d for d = 1..S
//   key_pe [1, D, L]   shared positional keys; distance d reads column L − d
//   z [H] or [1]       (any shape with that many elements) the span parameters, used as they are
//                      (the caller clamps them first, in fairseq's order)
//   -> [B, M, C]       heads merged; gradients accumulate into q, k, v, key_pe and z.
#pragma once
#include <cstdint>

#include "autograd/var.h"
#include "ops/attention.h"

namespace stretch::models::adaptive_span {

struct SpanAttentionOptions {
  int64_t heads = 0;     // H
  int64_t span = 0;      // S = L − trim_len: distances 1..S
  int64_t attn_span = 0; // L
  float ramp = 32.f;     // R
  ops::SpanMaskMode mode = ops::SpanMaskMode::AfterSoftmax;
  float dropout = 0.f;   // attention dropout on the masked probabilities (training)
  uint64_t seed = 0, stream = 0;
};

autograd::Var span_attention(const autograd::Var& q, const autograd::Var& k, const autograd::Var& v,
                             const autograd::Var& key_pe, const autograd::Var& z, const SpanAttentionOptions& o);

// The op's parameters for those operands (tests and benchmarks call the op with them directly).
ops::AttentionParams span_attention_params(int64_t batch, int64_t queries, int64_t channels, const float* key_pe,
                                           const float* z, int64_t z_count, const SpanAttentionOptions& o);

}  // namespace stretch::models::adaptive_span
