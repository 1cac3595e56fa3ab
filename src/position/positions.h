// position/positions.h — position bookkeeping outside the attention kernel: fairseq's
// make_positions (pads get padding_idx, tokens count from padding_idx+1), the sinusoidal table
// for a batch, and the key-padding mask. ALiBi slopes live in ops/alibi.h (the one function).
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace stretch::position {

// positions [B, T] I32: padding_idx + (1-based index among non-pad tokens) for tokens, padding_idx for pads.
// pos_offset: tokens already seen (incremental decoding) — positions continue from there.
Tensor make_positions(const Tensor& src /*[B, T] I32*/, int32_t padding_idx, int64_t pos_offset = 0);
// [B, T, C]: fairseq's SinusoidalPositionalEmbedding rows for make_positions(src); pad rows zero.
Tensor sinusoidal_for_tokens(const Tensor& src /*[B, T] I32*/, int64_t dim, int32_t padding_idx, int64_t pos_offset = 0);
// [B, T] U8 with 1 where src == padding_idx; an undefined Tensor when there is no pad at all.
Tensor key_padding_mask(const Tensor& src /*[B, T] I32*/, int32_t padding_idx);

}  // namespace stretch::position
