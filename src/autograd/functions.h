// autograd/functions.h — differentiable functions over Vars, one per coarse op.
// Contract: each function computes its forward with the ops layer's fast path and, when an
// input requires a gradient and grad mode is on, records a closure that calls the op's
// backward (which accumulates into the inputs' .grad(); a gradient nothing has written yet is
// overwritten instead of zero-filled first, see Var::grad_for). Leading dimensions are
// flattened: a [B, T, C] input to linear is treated as [B·T, C].
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/var.h"
#include "ops/activation.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/linear.h"

namespace stretch::autograd {

// y [.., O] = epi(x [.., I] · w [O, I]ᵀ + b [O])   (b may be undefined; epi Relu: the FFN's
// fc1 + ReLU in one op, which keeps only its output for backward)
Var linear(const Var& x, const Var& w, const Var& b, ops::LinearEpilogue epi = ops::LinearEpilogue::None);
// y [.., count] = x [.., I] · w[first : first + count]ᵀ + b[first : first + count] (w [O, I], b [O]
// or undefined): a linear layer that is some of w's output rows (Transformer-XL's qkv_net, ALiBi's
// fused q, k, v with memory: q from the segment's rows only, k and v from [memory ‖ segment]); the
// gradient goes to those rows of w's (and b's) gradient.
// detached > 0: x is [B, R, I] whose first `detached` rows of each batch are a memory that nobody
// differentiates (concat_time's rows before the segment): backward skips their input gradient
// (those rows of x's gradient are zero when it was fresh, else left as they were); w and b still
// get every row's share.
Var linear_rows(const Var& x, const Var& w, int64_t first, int64_t count, const Var& b = Var(),
                int64_t detached = 0);
// y [.., C] = LayerNorm(x [.., C]) · w [C] + b [C]
Var layer_norm(const Var& x, const Var& w, const Var& b, float eps = 1e-5f);
Var activation(const Var& x, ops::Activation act);
// a + b, same shape (residual connections, position embeddings)
Var add(const Var& a, const Var& b);
// alpha · x
Var scale(const Var& x, float alpha);
// y [.., C] = x [.., C] · w [C / group], channel c scaled by w[c / group] (ops/channel_scale.h:
// NormFormer's w_resid with group 1, c_attn [H] with group D)
Var channel_scale(const Var& x, const Var& w, int64_t group = 1);
// Inverted dropout; identity (no copy) when p == 0 or grad mode is off... only p matters:
// the caller passes p = 0 in evaluation.
Var dropout(const Var& x, const ops::DropoutParams& p);
// res + dropout(x): the residual connection in one pass (forward) and no copy for res's
// gradient (it takes the output's gradient buffer when it has none yet).
Var dropout_add(const Var& res, const Var& x, const ops::DropoutParams& p);
// out [N, C] = scale · table [V, C] [ids [N]]  (ids: an I32 tensor of any shape; out gets ids' shape + [C])
// padding_idx >= 0: that row gets no gradient (torch's nn.Embedding(padding_idx)); the forward reads it.
Var embedding(const Tensor& ids, const Var& table, float scale = 1.0f, int32_t padding_idx = -1);
// y [.., O] = x [.., I] · w [I, O]: a linear layer whose weight is stored transposed (fairseq's
// TiedLinear(transpose=True): the adaptive softmax's tail projection tied to the adaptive input's).
Var linear_transposed(const Var& x, const Var& w);
// out [n, C] = x [N, C] [rows]  (rows: I64 tensor [n]); backward scatter-adds into x's gradient.
Var gather_rows(const Var& x, const Tensor& rows);
// out [N, C] = 0, then out[rows[i]] += part.x[i] for each part (x [n, C], rows I64 [n]); backward
// gathers each part's gradient. The adaptive input's bands, each written to its tokens' rows.
struct RowPart {
  Var x;        // [n, C]
  Tensor rows;  // [n] I64
};
// out_shape: [.., C] with N = numel / C rows.
Var scatter_rows(const std::vector<RowPart>& parts, const Shape& out_shape);
// out [A + B, ..] = [a [A, ..]; b [B, ..]], any rank with equal trailing dims (the adaptive softmax's tied
// head: word rows, then cluster rows; Transformer-XL's head bias [c_0] then cluster_bias [k − 1])
Var concat_rows(const Var& a, const Var& b);
// out [n, ..] = x [N, ..] [start, start + n) along the first axis, any rank (a bias [V] too):
// Transformer-XL's adaptive softmax reads its clusters' rows of the tied [V, C] weight and its
// [V] bias; backward adds the output's gradient into those rows of x's gradient.
Var slice_rows(const Var& x, int64_t start, int64_t n);
// Along the time axis of [B, T, C] (XL-style memory, transformer_lm --mem-len):
// out [B, S + T, C] = [memory [B, S, C] ‖ x [B, T, C]] per batch row; memory is a constant (no
// gradient: the memory of earlier segments is detached), x's gradient is out's last T rows.
Var concat_time(const Tensor& memory, const Var& x);
// out [B, n, C] = the last n positions of x [B, T, C] (x itself when n = T); gradient into x's last n rows.
Var last_time(const Var& x, int64_t n);
// Rows of a table by position index, e.g. learned positions: same as embedding.
// [B, T, H·D] -> [B, H, T, D] and back
Var split_heads(const Var& x, int64_t heads);
Var merge_heads(const Var& x);
// What cross_entropy may do with the logits buffer. ReuseForGradient (when a gradient is
// recorded and the logits have none yet): the forward replaces the logits by exp(x − rowmax)
// and the backward turns those into ∂loss/∂logits in place (ops cross_entropy_*_inplace: one
// expf pass instead of two, no second [N, V] buffer); logits.value() no longer holds the logits
// once cross_entropy has returned. Training uses it; anything that reads the logits afterwards
// must keep the default.
enum class LogitsBuffer : uint8_t { Keep, ReuseForGradient };

// Scalar NLL (nats): sum or mean over rows whose target != ignore_index.
// logits [N, V] (or [B, T, V]), targets I32 with N elements. The count of scored rows is
// written to *count when given.
Var cross_entropy(const Var& logits, const Tensor& targets, int32_t ignore_index, ops::Reduction reduction,
                  int64_t* count = nullptr, LogitsBuffer buffer = LogitsBuffer::Keep);

}  // namespace stretch::autograd
