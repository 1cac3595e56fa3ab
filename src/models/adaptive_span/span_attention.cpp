// models/adaptive_span/span_attention.cpp — see span_attention.h.
#include "models/adaptive_span/span_attention.h"

#include <algorithm>

#include "autograd/tape.h"
#include "core/error.h"

namespace stretch::models::adaptive_span {

using autograd::Var;

ops::AttentionParams span_attention_params(int64_t B, int64_t M, int64_t C, const float* key_pe, const float* z,
                                           int64_t z_count, const SpanAttentionOptions& o) {
  STRETCH_CHECK(o.heads >= 1 && C % o.heads == 0, "span_attention: " << o.heads << " heads for C = " << C);
  STRETCH_CHECK(o.span >= 1 && o.span <= o.attn_span, "span_attention: span " << o.span << ", L " << o.attn_span);
  const int64_t H = o.heads, D = C / H, S = o.span, L = o.attn_span;
  ops::AttentionParams p;
  p.b = B;
  p.h = H;
  p.t = M;
  p.s = S + M;
  p.d = D;
  p.mask = ops::AttentionMask::Causal;
  p.min_distance = 1;  // a query never attends to itself
  p.window = S + 1;    // distances 1..S: the trimmed span
  // key_pe [D, L]: column L − d holds distance d, so row n (distance 1 + n) starts at column L − 1 − n.
  p.relkey = {.r = key_pe + (L - 1),
              .rows = S,
              .dist0 = 1,
              .share = ops::RelKeyShare::Shared,
              .row_stride = -1,
              .head_stride = 0,
              .elem_stride = L};
  // torch's clamp gradient at the ramp's ends (fairseq at z = 0, where the clamp keeps putting it)
  p.span = {.z = z, .heads = z_count, .ramp = o.ramp, .max_span = L, .mode = o.mode, .edges = ops::SpanMaskEdges::Closed};
  p.dropout = {.p = o.dropout, .seed = o.seed, .stream = o.stream};
  p.layout.q = {.batch = M * C, .head = D, .row = C};
  p.layout.kv = {.batch = (S + M) * C, .head = D, .row = C};
  p.layout.out = {.batch = M * C, .head = D, .row = C};
  return p;
}

Var span_attention(const Var& q, const Var& k, const Var& v, const Var& key_pe, const Var& z,
                   const SpanAttentionOptions& o) {
  const Shape& qs = q.shape();
  STRETCH_CHECK(qs.rank() == 3 && k.shape().rank() == 3 && k.shape() == v.shape() && k.shape()[0] == qs[0] &&
                    k.shape()[2] == qs[2] && k.shape()[1] == o.span + qs[1],
                "span_attention: q " << qs.str() << ", k " << k.shape().str() << ", span " << o.span);
  const int64_t B = qs[0], M = qs[1], C = qs[2];
  STRETCH_CHECK(key_pe.numel() == (C / o.heads) * o.attn_span, "span_attention: key_pe " << key_pe.shape().str());
  STRETCH_CHECK(z.numel() == o.heads || z.numel() == 1, "span_attention: z " << z.shape().str());
  const ops::AttentionParams p = span_attention_params(B, M, C, key_pe.data(), z.data(), z.numel(), o);
  Var out(Tensor::empty(qs));
  Tensor lse = Tensor::empty({B, p.h, M});
  ops::attention_forward(out.data(), lse.f32(), q.data(), k.data(), v.data(), p);
  if (autograd::needs_grad({&q, &k, &v, &key_pe, &z})) {
    out.set_requires_grad(true);
    const int64_t L = o.attn_span;
    autograd::tape().push([q, k, v, key_pe, z, out, lse, p, L] {
      ops::AttentionGrads extra;
      if (key_pe.requires_grad()) extra.drel_r = key_pe.grad_data() + (L - 1);
      if (z.requires_grad()) extra.dspan_z = z.grad_data();
      // The kernel writes all three of dq, dk, dv: scratch for those that need none.
      Tensor scratch[3];
      float* grads[3];
      const Var* in[3] = {&q, &k, &v};
      for (int i = 0; i < 3; ++i) {
        if (in[i]->requires_grad()) {
          grads[i] = in[i]->grad_data();
        } else {
          scratch[i] = Tensor::zeros(in[i]->shape());
          grads[i] = scratch[i].f32();
        }
      }
      ops::attention_backward(grads[0], grads[1], grads[2], extra, out.grad_data(), q.data(), k.data(), v.data(),
                              out.data(), lse.f32(), p, ops::GradInit::Accumulate);
      out.release_grad();
    });
  }
  return out;
}

}  // namespace stretch::models::adaptive_span
