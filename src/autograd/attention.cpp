#include "autograd/attention.h"

#include <algorithm>
#include <vector>

#include "autograd/tape.h"
#include "ops/alibi.h"
#include "ops/attention.h"
#include "ops/rope.h"

namespace stretch::autograd {
namespace {

bool is_alibi(ops::BiasPolicy b) { return b == ops::BiasPolicy::Alibi || b == ops::BiasPolicy::AlibiSym; }

// The learnable-or-fixed parameter of the selected policy (undefined for None): the one Var the
// backward may write a bias gradient to.
Var bias_param(const AttentionInputs& in) {
  if (is_alibi(in.bias)) return in.slopes;
  if (in.bias == ops::BiasPolicy::T5) return in.t5_table;
  return Var();
}

ops::AttentionParams make_params(int64_t B, int64_t H, int64_t T, int64_t S, int64_t D, const AttentionInputs& in) {
  ops::AttentionParams p;
  p.b = B;
  p.h = H;
  p.t = T;
  p.d = D;
  p.s = S;
  p.scale = in.scale;
  p.mask = in.mask;
  p.bias = in.bias;
  p.window = in.window;
  if (is_alibi(in.bias)) {
    STRETCH_CHECK(in.slopes.defined(), "attention: bias " << (in.bias == ops::BiasPolicy::Alibi ? "alibi" : "alibi-sym")
                                                          << " needs AttentionInputs::slopes [" << H << "]"
                                                          << " (alibi_slopes_var(H))");
    STRETCH_CHECK(in.slopes.shape() == Shape{H},
                  "attention: AttentionInputs::slopes is " << in.slopes.shape().str() << ", expected [" << H << "]");
    p.alibi = ops::AlibiOptions{
        .slopes = in.slopes.data(), .slope_scale = in.slope_scale, .shape = in.alibi_shape, .cap = in.alibi_cap};
  } else if (in.bias == ops::BiasPolicy::T5) {
    STRETCH_CHECK(in.t5_table.defined(), "attention: bias t5 needs AttentionInputs::t5_table [" << in.t5_num_buckets
                                                                                             << ", " << H << "]");
    STRETCH_CHECK((in.t5_table.shape() == Shape{in.t5_num_buckets, H}),
                  "attention: AttentionInputs::t5_table is " << in.t5_table.shape().str() << ", expected ["
                                                             << in.t5_num_buckets << ", " << H << "]");
    p.t5.table = in.t5_table.data();
    p.t5.num_buckets = static_cast<int>(in.t5_num_buckets);
    p.t5.max_distance = static_cast<int>(in.t5_max_distance);
  }
  if (in.key_padding.defined()) p.key_padding = in.key_padding.u8();
  p.dropout = {.p = in.dropout, .seed = in.seed, .stream = in.stream};
  return p;
}

// The bias gradient pointer for the kernel: the parameter's gradient when it is learnable.
ops::AttentionGrads bias_grads(const Var& param, const ops::AttentionParams& p) {
  ops::AttentionGrads extra;
  if (!param.requires_grad()) return extra;
  if (is_alibi(p.bias)) extra.dslopes = param.grad_data();
  if (p.bias == ops::BiasPolicy::T5) extra.dt5_table = param.grad_data();
  return extra;
}

}  // namespace

Var alibi_slopes_var(int64_t heads, bool requires_grad) {
  const std::vector<float> m = ops::alibi_slopes(static_cast<int>(heads));
  Tensor t = Tensor::empty({heads});
  std::copy(m.begin(), m.end(), t.f32());
  return Var(t, requires_grad);
}

JointGrads joint_grads(std::initializer_list<const Var*> inputs) {
  JointGrads g;
  std::vector<ops::GradInit> inits;
  for (const Var* v : inputs) {
    ops::GradInit init = ops::GradInit::Overwrite;
    if (v->requires_grad()) {
      g.ptr.push_back(v->grad_for(init));
    } else {
      g.scratch.push_back(Tensor::empty(v->shape()));
      g.ptr.push_back(g.scratch.back().f32());
    }
    inits.push_back(init);
  }
  g.init = inits.empty() ? ops::GradInit::Overwrite : inits[0];
  if (std::any_of(inits.begin(), inits.end(), [&](ops::GradInit i) { return i != g.init; })) {
    size_t i = 0;
    for (const Var* v : inputs) {
      if (inits[i] == ops::GradInit::Overwrite) std::fill_n(g.ptr[i], v->numel(), 0.f);
      ++i;
    }
    g.init = ops::GradInit::Accumulate;
  }
  return g;
}

Var attention(const Var& q, const Var& k, const Var& v, const AttentionInputs& in) {
  const Shape& qs = q.shape();
  const Shape& ks = k.shape();
  STRETCH_CHECK(qs.rank() == 4 && ks.rank() == 4 && ks == v.shape(), "attention: q " << qs.str() << " k " << ks.str());
  const ops::AttentionParams p = make_params(qs[0], qs[1], qs[2], ks[2], qs[3], in);
  Var out(Tensor::empty(qs));
  Tensor lse = Tensor::empty({p.b, p.h, p.t});
  ops::attention_forward(out.data(), lse.f32(), q.data(), k.data(), v.data(), p);
  const Var param = bias_param(in);
  if (needs_grad({&q, &k, &v, &param})) {
    Tensor key_padding = in.key_padding;  // keeps p.key_padding (and param: p's bias pointers) alive until backward
    out.set_requires_grad(true);
    tape().push([q, k, v, param, out, lse, p, key_padding] {
      const ops::AttentionGrads extra = bias_grads(param, p);
      const JointGrads g = joint_grads({&q, &k, &v});
      ops::attention_backward(g.ptr[0], g.ptr[1], g.ptr[2], extra, out.grad_data(), q.data(), k.data(), v.data(),
                              out.data(), lse.f32(), p, g.init);
      out.release_grad();
    });
  }
  return out;
}

Var attention_qkv(const Var& qkv, int64_t heads, const AttentionInputs& in) {
  const Shape& s = qkv.shape();  // [B, T, 3·H·D]
  STRETCH_CHECK(s.rank() == 3 && s[2] % (3 * heads) == 0, "attention_qkv: " << s.str() << " for " << heads << " heads");
  const int64_t B = s[0], T = s[1], HD = s[2] / 3, D = HD / heads;
  ops::AttentionParams p = make_params(B, heads, T, T, D, in);
  p.layout.q = {.batch = T * 3 * HD, .head = D, .row = 3 * HD};
  p.layout.kv = p.layout.q;
  p.layout.out = {.batch = T * HD, .head = D, .row = HD};
  Var out(Tensor::empty({B, T, HD}));
  Tensor lse = Tensor::empty({B, heads, T});
  const float* base = qkv.data();
  ops::attention_forward(out.data(), lse.f32(), base, base + HD, base + 2 * HD, p);
  const Var param = bias_param(in);
  if (needs_grad({&qkv, &param})) {
    Tensor key_padding = in.key_padding;  // keeps p.key_padding (and param: p's bias pointers) alive until backward
    out.set_requires_grad(true);
    tape().push([qkv, param, out, lse, p, key_padding, HD] {
      const ops::AttentionGrads extra = bias_grads(param, p);
      Tensor scratch;
      ops::GradInit init = ops::GradInit::Overwrite;
      float* g = qkv.requires_grad() ? qkv.grad_for(init) : (scratch = Tensor::empty(qkv.shape())).f32();
      const float* x = qkv.data();
      ops::attention_backward(g, g + HD, g + 2 * HD, extra, out.grad_data(), x, x + HD, x + 2 * HD, out.data(),
                              lse.f32(), p, init);
      out.release_grad();
    });
  }
  return out;
}

Var attention_q_kv(const Var& q, const Var& kv, int64_t heads, const AttentionInputs& in) {
  const Shape& qs = q.shape();   // [B, T, H·D]
  const Shape& ks = kv.shape();  // [B, S, 2·H·D]
  STRETCH_CHECK(qs.rank() == 3 && ks.rank() == 3 && heads > 0 && qs[2] % heads == 0 && ks[0] == qs[0] &&
                    ks[2] == 2 * qs[2] && qs[1] <= ks[1],
                "attention_q_kv: q " << qs.str() << ", kv " << ks.str() << " for " << heads << " heads");
  const int64_t B = qs[0], T = qs[1], S = ks[1], HD = qs[2], D = HD / heads;
  ops::AttentionParams p = make_params(B, heads, T, S, D, in);
  p.layout.q = {.batch = T * HD, .head = D, .row = HD};
  p.layout.kv = {.batch = S * 2 * HD, .head = D, .row = 2 * HD};
  p.layout.out = p.layout.q;
  Var out(Tensor::empty({B, T, HD}));
  Tensor lse = Tensor::empty({B, heads, T});
  ops::attention_forward(out.data(), lse.f32(), q.data(), kv.data(), kv.data() + HD, p);
  const Var param = bias_param(in);
  if (needs_grad({&q, &kv, &param})) {
    Tensor key_padding = in.key_padding;  // keeps p.key_padding (and param: p's bias pointers) alive until backward
    out.set_requires_grad(true);
    tape().push([q, kv, param, out, lse, p, key_padding, HD] {
      const ops::AttentionGrads extra = bias_grads(param, p);
      const JointGrads g = joint_grads({&q, &kv});
      ops::attention_backward(g.ptr[0], g.ptr[1], g.ptr[1] + HD, extra, out.grad_data(), q.data(), kv.data(),
                              kv.data() + HD, out.data(), lse.f32(), p, g.init);
      out.release_grad();
    });
  }
  return out;
}

Var rope(const Var& x, int64_t pos0, float base) {
  const Shape& s = x.shape();
  ops::RopeDims d{.b = s[0], .h = s[1], .t = s[2], .d = s[3], .pos0 = pos0, .base = base};
  Var y(Tensor::empty(s));
  ops::rope_forward(y.data(), x.data(), d);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, d] {
      ops::rope_backward(x.grad_data(), y.grad_data(), d);
      y.release_grad();
    });
  }
  return y;
}

}  // namespace stretch::autograd
