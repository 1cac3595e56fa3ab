// models/transformer_xl/rel_attention.cpp — see rel_attention.h.
#include "models/transformer_xl/rel_attention.h"

#include <algorithm>

#include "autograd/tape.h"
#include "core/error.h"
#include "ops/attention.h"

namespace stretch::models::xl {

using autograd::Var;

Var rel_attention(const Var& qkv, const Var& r, const Var& u, const Var& w, const RelAttentionInputs& in) {
  const Shape& s = qkv.shape();  // [B, S, 3·H·D]
  STRETCH_CHECK(s.rank() == 3 && in.heads > 0 && s[2] % (3 * in.heads) == 0,
                "rel_attention: qkv " << s.str() << " for " << in.heads << " heads");
  const int64_t B = s[0], S = s[1], HD = s[2] / 3, H = in.heads, D = HD / H, T = in.queries;
  STRETCH_CHECK(T > 0 && T <= S, "rel_attention: " << T << " queries for " << S << " keys");
  STRETCH_CHECK(r.shape().rank() == 2 && r.shape()[1] == HD, "rel_attention: r " << r.shape().str());
  STRETCH_CHECK((u.shape() == Shape{H, D}) && (w.shape() == Shape{H, D}),
                "rel_attention: r_w_bias " << u.shape().str() << ", r_r_bias " << w.shape().str());
  const int64_t M = S - T;
  ops::AttentionParams p;
  p.b = B, p.h = H, p.t = T, p.s = S, p.d = D;
  p.mask = ops::AttentionMask::Causal;
  p.window = in.window;
  p.relkey = ops::RelKeyOptions{.r = r.data(), .rows = r.shape()[0], .dist0 = 0, .u = u.data(), .w = w.data()};
  p.layout.q = {.batch = S * 3 * HD, .head = D, .row = 3 * HD};
  p.layout.kv = p.layout.q;
  p.layout.out = {.batch = T * HD, .head = D, .row = HD};
  p.dropout = {.p = in.dropatt, .seed = in.seed, .stream = in.stream};
  Var out(Tensor::empty({B, T, HD}));
  Tensor lse = Tensor::empty({B, H, T});
  const float* base = qkv.data();
  ops::attention_forward(out.data(), lse.f32(), base + M * 3 * HD, base + HD, base + 2 * HD, p);
  if (autograd::needs_grad({&qkv, &r, &u, &w})) {
    out.set_requires_grad(true);
    autograd::tape().push([qkv, r, u, w, out, lse, p, M, HD] {
      ops::AttentionGrads extra;
      if (r.requires_grad()) extra.drel_r = r.grad_data();
      if (u.requires_grad()) extra.drel_u = u.grad_data();
      if (w.requires_grad()) extra.drel_w = w.grad_data();
      // dq covers only the last T rows of the q block: a fresh buffer is zeroed first so the
      // memory rows' q gradient is 0, and the kernel accumulates.
      Tensor scratch;
      ops::GradInit init = ops::GradInit::Overwrite;
      float* g = qkv.requires_grad() ? qkv.grad_for(init) : (scratch = Tensor::empty(qkv.shape())).f32();
      if (init == ops::GradInit::Overwrite || !qkv.requires_grad()) std::fill_n(g, qkv.numel(), 0.f);
      const float* x = qkv.data();
      ops::attention_backward(g + M * 3 * HD, g + HD, g + 2 * HD, extra, out.grad_data(), x + M * 3 * HD, x + HD,
                              x + 2 * HD, out.data(), lse.f32(), p, ops::GradInit::Accumulate);
      out.release_grad();
    });
  }
  return out;
}

}  // namespace stretch::models::xl
