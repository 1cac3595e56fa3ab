// models/transformer_xl/rel_attention.cpp — see rel_attention.h.
#include "models/transformer_xl/rel_attention.h"

#include <algorithm>

#include "autograd/attention.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "ops/attention.h"

namespace stretch::models::xl {

using autograd::Var;

Var rel_attention(const Var& q, const Var& kv, const Var& r, const Var& u, const Var& w, const RelAttentionInputs& in) {
  const Shape& qs = q.shape();   // [B, T, H·D]
  const Shape& ks = kv.shape();  // [B, S, 2·H·D]
  STRETCH_CHECK(qs.rank() == 3 && ks.rank() == 3 && in.heads > 0 && qs[2] % in.heads == 0 && ks[0] == qs[0] &&
                    ks[2] == 2 * qs[2],
                "rel_attention: q " << qs.str() << ", kv " << ks.str() << " for " << in.heads << " heads");
  const int64_t B = qs[0], T = qs[1], S = ks[1], HD = qs[2], H = in.heads, D = HD / H;
  STRETCH_CHECK(T > 0 && T <= S, "rel_attention: " << T << " queries for " << S << " keys");
  STRETCH_CHECK(r.shape().rank() == 2 && r.shape()[1] == HD, "rel_attention: r " << r.shape().str());
  STRETCH_CHECK((u.shape() == Shape{H, D}) && (w.shape() == Shape{H, D}),
                "rel_attention: r_w_bias " << u.shape().str() << ", r_r_bias " << w.shape().str());
  ops::AttentionParams p;
  p.b = B, p.h = H, p.t = T, p.s = S, p.d = D;
  p.mask = ops::AttentionMask::Causal;
  p.window = in.window;
  p.relkey = ops::RelKeyOptions{.r = r.data(), .rows = r.shape()[0], .dist0 = 0, .u = u.data(), .w = w.data()};
  p.layout.q = {.batch = T * HD, .head = D, .row = HD};
  p.layout.kv = {.batch = S * 2 * HD, .head = D, .row = 2 * HD};
  p.layout.out = p.layout.q;
  p.dropout = {.p = in.dropatt, .seed = in.seed, .stream = in.stream};
  Var out(Tensor::empty({B, T, HD}));
  Tensor lse = Tensor::empty({B, H, T});
  ops::attention_forward(out.data(), lse.f32(), q.data(), kv.data(), kv.data() + HD, p);
  if (autograd::needs_grad({&q, &kv, &r, &u, &w})) {
    out.set_requires_grad(true);
    autograd::tape().push([q, kv, r, u, w, out, lse, p, HD] {
      ops::AttentionGrads extra;
      if (r.requires_grad()) extra.drel_r = r.grad_data();
      if (u.requires_grad()) extra.drel_u = u.grad_data();
      if (w.requires_grad()) extra.drel_w = w.grad_data();
      const autograd::JointGrads g = autograd::joint_grads({&q, &kv});
      ops::attention_backward(g.ptr[0], g.ptr[1], g.ptr[1] + HD, extra, out.grad_data(), q.data(), kv.data(),
                              kv.data() + HD, out.data(), lse.f32(), p, g.init);
      out.release_grad();
    });
  }
  return out;
}

}  // namespace stretch::models::xl
