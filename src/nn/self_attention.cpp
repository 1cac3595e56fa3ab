// nn/self_attention.cpp — see self_attention.h.
#include "nn/self_attention.h"

#include <algorithm>
#include <cmath>

namespace stretch::nn {
namespace {
// Appends x [B, H, T, D] to the cached [B, H, S, D] along the time axis: [B, H, S+T, D].
Tensor append_time(const Tensor& cached, const Tensor& x) {
  if (!cached.defined()) return x.clone();
  const int64_t B = x.dim(0), H = x.dim(1), T = x.dim(2), D = x.dim(3), S = cached.dim(2);
  Tensor out = Tensor::empty({B, H, S + T, D});
  for (int64_t bh = 0; bh < B * H; ++bh) {
    std::copy_n(cached.f32() + bh * S * D, S * D, out.f32() + bh * (S + T) * D);
    std::copy_n(x.f32() + bh * T * D, T * D, out.f32() + bh * (S + T) * D + S * D);
  }
  return out;
}
}  // namespace

SelfAttention::SelfAttention(ParameterList& params, const std::string& prefix, int64_t C, int64_t H,
                             const AttentionPosition* position)
    : heads_(H), head_dim_(C / H), position_(position) {
  // One [3C, C] weight (and [3C] bias, with gradients alike) holds q, k, v so that a single GEMM
  // projects all three; the named parameters are views into it (fairseq names, k, v, q order).
  Tensor w = Tensor::zeros({3 * C, C}), gw = Tensor::zeros({3 * C, C});
  Tensor b = Tensor::zeros({3 * C}), gb = Tensor::zeros({3 * C});
  qkv_weight = Var(w, gw, true);
  qkv_bias = Var(b, gb, true);
  auto part = [&](const Tensor& t, const Tensor& g, int i) { return Var(t.slice_rows(i * C, C), g.slice_rows(i * C, C), true); };
  k_proj = {params.add(prefix + "k_proj.weight", part(w, gw, 1)), params.add(prefix + "k_proj.bias", part(b, gb, 1))};
  v_proj = {params.add(prefix + "v_proj.weight", part(w, gw, 2)), params.add(prefix + "v_proj.bias", part(b, gb, 2))};
  q_proj = {params.add(prefix + "q_proj.weight", part(w, gw, 0)), params.add(prefix + "q_proj.bias", part(b, gb, 0))};
  out_proj = Linear::make(params, prefix + "out_proj.", C, C);
}

Var SelfAttention::operator()(const Var& xq, const Var& xkv, const AttentionCall& call) const {
  using namespace autograd;
  const int64_t H = heads_;
  AttentionInputs in;
  in.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  position_->set_bias(in);
  in.key_padding = call.key_padding;
  in.dropout = call.dropout;
  in.seed = call.seed;
  in.stream = call.stream;
  if (!position_->rotates() && !call.kv) {
    const int64_t C = qkv_weight.shape()[1];
    if (xq.shape()[1] == xkv.shape()[1]) {
      // One GEMM for q, k, v; attention reads them in place and writes [B, T, C].
      Var qkv = linear(xkv, qkv_weight, qkv_bias);  // [B, T, 3C]
      return out_proj(attention_qkv(qkv, H, in));
    }
    // q from xq's rows, k and v from all of xkv's (its first call.detached rows per batch get no
    // input gradient); attention reads both in place.
    Var q = linear_rows(xq, qkv_weight, 0, C, qkv_bias);                    // [B, Tq, C]
    Var kv = linear_rows(xkv, qkv_weight, C, 2 * C, qkv_bias, call.detached);  // [B, T, 2C]
    return out_proj(attention_q_kv(q, kv, H, in));
  }
  STRETCH_CHECK(call.detached == 0, "SelfAttention: detached memory rows with a rotating position or a cache");
  Var q = split_heads(q_proj(xq), H);   // [B, H, Tq, D]
  Var k = split_heads(k_proj(xkv), H);  // [B, H, T, D]
  Var v = split_heads(v_proj(xkv), H);
  if (position_->rotates()) position_->rotate(q, k, call.pos0 + xkv.shape()[1] - xq.shape()[1], call.pos0);
  if (call.kv) {  // keys/values of the whole prefix; the kernel places query i at key S−T+i
    call.kv->k = append_time(call.kv->k, k.value());
    call.kv->v = append_time(call.kv->v, v.value());
    k = Var(call.kv->k);
    v = Var(call.kv->v);
  }
  return out_proj(merge_heads(attention(q, k, v, in)));  // [B, Tq, C]
}

}  // namespace stretch::nn
