// models/transformer_xl/rel_attention.h — the differentiable relative attention of one
// Transformer-XL layer (REFERENCE.md §6.1), straight through the one fused attention op with its
// relative-key term (ops/attention.h RelKeyOptions): no [T, M+T] score matrix, no rel-shift.
// Contract:
//   q [B, T, H·D]: the segment's queries (qkv_net's q rows applied to the segment only: HF and
//     fairseq project all M + T rows and drop the memory's queries; that product is skipped here).
//   kv [B, S, 2·H·D]: qkv_net's k and v rows applied to [memory ‖ segment] (S = M + T rows, k then
//     v channels, head h at channels h·D of each block). Query i sits at key position M + i and
//     sees keys j ≤ M + i (and, with window W > 0, distance M + i − j < W: same_length is
//     W = mem_len).
//   r [rows, H·D]: r_net of the positional embedding, row d = distance d (packed, ascending;
//     clamp_len already folded into which embedding row d holds), rows ≥ every visible distance.
//   u = r_w_bias, w = r_r_bias [H, D].
//   out [B, T, H·D] = Σ_j softmax_j(scale·[(q_i + u)·k_j + (q_i + w)·r[M + i − j]]) · dropatt · v_j,
//   scale = D^(-1/2). Gradients flow to q, kv (every S row), r, u and w; dropatt masks are keyed
//   by (seed, stream) as in ops/attention.h.
#pragma once
#include <cstdint>

#include "autograd/var.h"

namespace stretch::models::xl {

struct RelAttentionInputs {
  int64_t heads = 0;        // H
  int64_t window = 0;       // same_length: mem_len (0: unlimited)
  float dropatt = 0.f;      // attention dropout (training only)
  uint64_t seed = 0, stream = 0;
};

autograd::Var rel_attention(const autograd::Var& q, const autograd::Var& kv, const autograd::Var& r,
                            const autograd::Var& u, const autograd::Var& w, const RelAttentionInputs& in);

}  // namespace stretch::models::xl
