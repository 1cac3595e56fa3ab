#include "autograd/functions.h"

#include <algorithm>

#include "autograd/tape.h"
#include "ops/channel_scale.h"
#include "ops/cross_entropy_softmax.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/row_gather.h"

namespace stretch::autograd {
namespace {

Shape with_last(const Shape& s, int64_t last) {
  std::vector<int64_t> d = s.dims();
  d.back() = last;
  return Shape(d);
}

// x.grad += g [N] through a kernel that can also overwrite: a fresh gradient is written by
// `store(ptr, init)` without a zero-fill first.
template <class Store>
void store_grad(const Var& x, Store store) {
  ops::GradInit init;
  float* g = x.grad_for(init);
  store(g, init);
}

}  // namespace

namespace {

// Under Bf16Products::Fp32Fma: fp32 copies of the bf16 values of x [N, I] and of w's rows
// [offset / I, + O) (ops::round_to_bf16_values), the operands of linear's plain fp32 products.
struct Bf16Values {
  Tensor x, w;
  ops::LinearBf16 pre() const {
    if (!x.defined()) return {};
    return {.inp_values = x.f32(), .weight_values = w.f32()};
  }
};
Bf16Values bf16_values(const Var& x, const Var& w, int64_t offset, const ops::LinearDims& d) {
  Bf16Values v{Tensor::empty({d.n, d.in_features}), Tensor::empty({d.out_features, d.in_features})};
  ops::round_to_bf16_values(v.x.f32(), x.data(), d.n, d.in_features);
  ops::round_to_bf16_values(v.w.f32(), w.data() + offset, d.out_features, d.in_features);
  return v;
}

// linear and linear_rows: w's (and b's) output rows [first, first + count) are the layer's weight;
// `detached` rows at the start of each batch of x [B, R, I] get no input gradient.
Var linear_of_rows(const Var& x, const Var& w, const Var& b, ops::LinearEpilogue epi, int64_t first, int64_t count,
                   int64_t detached = 0) {
  const int64_t in = w.shape()[1];
  STRETCH_CHECK(x.shape()[-1] == in, "linear: input " << x.shape().str() << " vs weight " << w.shape().str());
  STRETCH_CHECK(first >= 0 && count >= 0 && first + count <= w.shape()[0],
                "linear: rows [" << first << ", " << first + count << ") of weight " << w.shape().str());
  STRETCH_CHECK(!b.defined() || (b.shape().rank() == 1 && b.shape()[0] == w.shape()[0]),
                "linear: bias " << b.shape().str() << " for weight " << w.shape().str());
  STRETCH_CHECK(detached == 0 || (x.shape().rank() == 3 && detached > 0 && detached < x.shape()[1]),
                "linear: " << detached << " detached rows of input " << x.shape().str());
  ops::LinearDims d{.n = x.numel() / in, .in_features = in, .out_features = count};
  if (detached > 0) d.block = x.shape()[1], d.skip = detached;
  const int64_t offset = first * in;  // the rows' first weight (and weight-gradient) element
  Var y(Tensor::empty(with_last(x.shape(), count)));
  const bool grad = needs_grad({&x, &w, &b});
  // bf16 training, what is made of the input and the weight for the GEMMs that read them:
  // - native products: the weight's packed bf16 copy, made here and kept for backward's dx product. The
  //   input is rounded by each GEMM that reads it (the forward's, dweight's): a packed copy kept from
  //   forward to backward made native `--bf16` hold up to 1.16x fp32 training's memory, and rounding
  //   it twice costs ~0.5% of a Zen 4 step (docs/BENCHMARKS.md, session 33);
  // - Fp32Fma: fp32 copies of both operands' values, made here for the forward and made again in
  //   backward (bf16_values) rather than kept: kept, they made `--bf16` hold 1.4-1.6x fp32 training's
  //   memory; made again, they cost one rounding pass per operand, small next to the products.
  Tensor w16;
  ops::LinearBf16 pre;
  const bool bf16 = grad && ops::matmul_precision() == ops::GemmPrecision::Bf16 && d.n > 0 && in > 0 && count > 0;
  const bool fma_values = bf16 && ops::bf16_products() == ops::Bf16Products::Fp32Fma;
  Bf16Values fwd_values;
  if (fma_values) {
    fwd_values = bf16_values(x, w, offset, d);
    pre = fwd_values.pre();
  } else if (bf16) {
    w16 = Tensor::empty({count, in}, DType::BF16);
    ops::round_to_bf16(reinterpret_cast<uint16_t*>(w16.bf()), w.data() + offset, count, in);
    pre = {.weight = reinterpret_cast<const uint16_t*>(w16.bf())};
  }
  ops::linear_forward(y.data(), x.data(), w.data() + offset, b.defined() ? b.data() + first : nullptr, d, epi, pre);
  if (fma_values) fwd_values = {}, pre = {};  // not kept for backward (above)
  if (grad) {
    y.set_requires_grad(true);
    tape().push([x, w, b, y, d, epi, w16, pre, fma_values, offset, first] {
      float* dy = y.grad_data();
      // ReLU backward from the output, in place: dy becomes ∂L/∂(pre-activation).
      if (epi == ops::LinearEpilogue::Relu)
        ops::activation_backward(dy, dy, y.data(), y.numel(), ops::Activation::Relu, ops::GradInit::Overwrite);
      ops::GradInit init = ops::GradInit::Accumulate;
      float* dx = x.requires_grad() ? x.grad_for(init) : nullptr;
      if (dx && d.skip > 0 && init == ops::GradInit::Overwrite)  // a fresh buffer: the skipped rows read 0
        for (int64_t r0 = 0; r0 < d.n; r0 += d.block) std::fill_n(dx + r0 * d.in_features, d.skip * d.in_features, 0.f);
      float* dw = w.requires_grad() ? w.grad_data() + offset : nullptr;
      // Fp32Fma: the values again, where linear_backward reads them (both products; with one, its
      // GEMM rounds its own operands, with the same result). Both ways dy is rounded in place (y's
      // gradient, released below: no [N, O] copy; for the output layer that copy was [N, V]).
      const Bf16Values values = fma_values && dx && dw ? bf16_values(x, w, offset, d) : Bf16Values{};
      ops::LinearBf16 bpre = pre;
      if (fma_values) bpre = values.pre();
      bpre.dout_in_place = dy;
      ops::linear_backward(dx, dw, b.defined() && b.requires_grad() ? b.grad_data() + first : nullptr, dy, x.data(),
                           w.data() + offset, d, init, bpre);
      y.release_grad();
    });
  }
  return y;
}

}  // namespace

Var linear(const Var& x, const Var& w, const Var& b, ops::LinearEpilogue epi) {
  return linear_of_rows(x, w, b, epi, 0, w.shape()[0]);
}

Var linear_rows(const Var& x, const Var& w, int64_t first, int64_t count, const Var& b, int64_t detached) {
  return linear_of_rows(x, w, b, ops::LinearEpilogue::None, first, count, detached);
}

Var layer_norm(const Var& x, const Var& w, const Var& b, float eps) {
  const int64_t c = x.shape()[-1];
  ops::LayerNormDims d{.n = x.numel() / c, .c = c, .eps = eps};
  Var y(Tensor::empty(x.shape()));
  Tensor mean = Tensor::empty({d.n}), rstd = Tensor::empty({d.n});
  ops::layernorm_forward(y.data(), mean.f32(), rstd.f32(), x.data(), w.data(), b.data(), d);
  if (needs_grad({&x, &w, &b})) {
    y.set_requires_grad(true);
    tape().push([x, w, b, y, d, mean, rstd] {
      ops::GradInit init = ops::GradInit::Accumulate;
      float* dx = x.requires_grad() ? x.grad_for(init) : nullptr;
      ops::layernorm_backward(dx, w.requires_grad() ? w.grad_data() : nullptr,
                              b.requires_grad() ? b.grad_data() : nullptr, y.grad_data(), x.data(), w.data(),
                              mean.f32(), rstd.f32(), d, init);
      y.release_grad();
    });
  }
  return y;
}

Var activation(const Var& x, ops::Activation act) {
  Var y(Tensor::empty(x.shape()));
  ops::activation_forward(y.data(), x.data(), x.numel(), act);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, act] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        ops::activation_backward(g, y.grad_data(), x.data(), x.numel(), act, init);
      });
      y.release_grad();
    });
  }
  return y;
}

Var add(const Var& a, const Var& b) {
  STRETCH_CHECK(a.shape() == b.shape(), "add: " << a.shape().str() << " vs " << b.shape().str());
  Var y(Tensor::empty(a.shape()));
  ops::add_forward(y.data(), a.data(), b.data(), a.numel());
  if (needs_grad({&a, &b})) {
    y.set_requires_grad(true);
    tape().push([a, b, y] {
      const Tensor g = y.grad();
      // b first: a may take g's buffer itself.
      if (b.requires_grad()) {
        store_grad(b, [&](float* gb, ops::GradInit init) {
          if (init == ops::GradInit::Overwrite) ops::scale_forward(gb, g.f32(), 1.0f, b.numel());
          else ops::axpy(gb, g.f32(), 1.0f, b.numel());
        });
      }
      if (a.requires_grad()) a.accumulate_grad(g);
      y.release_grad();
    });
  }
  return y;
}

Var scale(const Var& x, float alpha) {
  Var y(Tensor::empty(x.shape()));
  ops::scale_forward(y.data(), x.data(), alpha, x.numel());
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, alpha] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        if (init == ops::GradInit::Overwrite) ops::scale_forward(g, y.grad_data(), alpha, x.numel());
        else ops::axpy(g, y.grad_data(), alpha, x.numel());
      });
      y.release_grad();
    });
  }
  return y;
}

Var channel_scale(const Var& x, const Var& w, int64_t group) {
  const int64_t c = x.shape()[-1];
  STRETCH_CHECK(group > 0 && c % group == 0 && w.numel() == c / group,
                "channel_scale: x " << x.shape().str() << ", w " << w.shape().str() << ", group " << group);
  const ops::ChannelScaleDims d{.n = x.numel() / c, .c = c, .group = group};
  Var y(Tensor::empty(x.shape()));
  ops::channel_scale_forward(y.data(), x.data(), w.data(), d);
  if (needs_grad({&x, &w})) {
    y.set_requires_grad(true);
    tape().push([x, w, y, d] {
      // w first: it reads x's values, which x's gradient never touches.
      if (w.requires_grad()) ops::channel_scale_backward(nullptr, w.grad_data(), y.grad_data(), x.data(), w.data(), d);
      if (x.requires_grad())
        store_grad(x, [&](float* g, ops::GradInit init) {
          ops::channel_scale_backward(g, nullptr, y.grad_data(), x.data(), w.data(), d, init);
        });
      y.release_grad();
    });
  }
  return y;
}

Var dropout(const Var& x, const ops::DropoutParams& p) {
  if (p.p <= 0.f) return x;
  Var y(Tensor::empty(x.shape()));
  ops::dropout_forward(y.data(), x.data(), x.numel(), p);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, p] {
      store_grad(x, [&](float* g, ops::GradInit init) { ops::dropout_backward(g, y.grad_data(), x.numel(), p, init); });
      y.release_grad();
    });
  }
  return y;
}

Var dropout_add(const Var& res, const Var& x, const ops::DropoutParams& p) {
  if (p.p <= 0.f) return add(res, x);
  STRETCH_CHECK(res.shape() == x.shape(), "dropout_add: " << res.shape().str() << " vs " << x.shape().str());
  Var y(Tensor::empty(x.shape()));
  ops::dropout_add_forward(y.data(), res.data(), x.data(), x.numel(), p);
  if (needs_grad({&res, &x})) {
    y.set_requires_grad(true);
    tape().push([res, x, y, p] {
      const Tensor g = y.grad();
      if (x.requires_grad())  // before res may take g's buffer
        store_grad(x, [&](float* gx, ops::GradInit init) { ops::dropout_backward(gx, g.f32(), x.numel(), p, init); });
      if (res.requires_grad()) res.accumulate_grad(g);
      y.release_grad();
    });
  }
  return y;
}

Var embedding(const Tensor& ids, const Var& table, float scale, int32_t padding_idx) {
  const int64_t c = table.shape()[1];
  ops::EmbeddingDims d{.n = ids.numel(), .v = table.shape()[0], .c = c, .padding_idx = padding_idx};
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(c);
  Var y(Tensor::empty(Shape(dims)));
  ops::embedding_forward(y.data(), ids.i32(), table.data(), scale, d);
  if (needs_grad({&table})) {
    y.set_requires_grad(true);
    tape().push([ids, table, y, scale, d] {
      ops::embedding_backward(table.grad_data(), y.grad_data(), ids.i32(), scale, d);
      y.release_grad();
    });
  }
  return y;
}

Var linear_transposed(const Var& x, const Var& w) {
  const int64_t in = w.shape()[0], outf = w.shape()[1];
  STRETCH_CHECK(x.shape()[-1] == in, "linear_transposed: input " << x.shape().str() << " vs weight " << w.shape().str());
  const int64_t n = x.numel() / std::max<int64_t>(in, 1);
  Var y(Tensor::empty(with_last(x.shape(), outf)));
  // y [n, O] = x [n, I] · w [I, O]
  ops::gemm({.m = n, .n = outf, .k = in, .precision = ops::matmul_precision()}, x.data(), w.data(), y.data());
  if (needs_grad({&x, &w})) {
    y.set_requires_grad(true);
    tape().push([x, w, y, n, in, outf] {
      const float* dy = y.grad_data();
      if (x.requires_grad()) {  // dx [n, I] += dy [n, O] · wᵀ
        ops::GradInit init = ops::GradInit::Accumulate;
        float* dx = x.grad_for(init);
        ops::gemm({.trans_b = ops::Trans::Yes, .m = n, .n = in, .k = outf,
                   .beta = init == ops::GradInit::Accumulate ? 1.f : 0.f, .precision = ops::matmul_precision()},
                  dy, w.data(), dx);
      }
      if (w.requires_grad())  // dw [I, O] += xᵀ · dy
        ops::gemm({.trans_a = ops::Trans::Yes, .m = in, .n = outf, .k = n, .beta = 1.f,
                   .precision = ops::matmul_precision()},
                  x.data(), dy, w.grad_data());
      y.release_grad();
    });
  }
  return y;
}

Var gather_rows(const Var& x, const Tensor& rows) {
  const int64_t c = x.shape()[-1];
  const ops::RowGatherDims d{.n = rows.numel(), .rows = x.numel() / std::max<int64_t>(c, 1), .c = c};
  Var y(Tensor::empty({d.n, c}));
  ops::row_gather_forward(y.data(), x.data(), rows.i64(), d);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, rows, d] {
      ops::row_gather_backward(x.grad_data(), y.grad_data(), rows.i64(), d);
      y.release_grad();
    });
  }
  return y;
}

Var scatter_rows(const std::vector<RowPart>& parts, const Shape& out_shape) {
  const int64_t c = out_shape[-1], n_out = out_shape.numel() / std::max<int64_t>(c, 1);
  Var y(Tensor::zeros(out_shape));
  bool grad = false;
  for (const RowPart& p : parts) {
    STRETCH_CHECK(p.x.shape()[-1] == c && p.rows.numel() * c == p.x.numel(),
                  "scatter_rows: " << p.rows.numel() << " rows for " << p.x.shape().str() << " into [" << n_out << ", "
                                   << c << "]");
    ops::row_gather_backward(y.data(), p.x.data(), p.rows.i64(), {.n = p.rows.numel(), .rows = n_out, .c = c});
    grad = needs_grad({&p.x}) || grad;  // every part seen (a GradWatch notes each)
  }
  if (grad) {
    y.set_requires_grad(true);
    tape().push([parts, y, n_out, c] {
      for (const RowPart& p : parts) {
        if (!p.x.requires_grad()) continue;
        ops::GradInit init = ops::GradInit::Accumulate;
        float* dx = p.x.grad_for(init);
        ops::row_gather_forward(dx, y.grad_data(), p.rows.i64(), {.n = p.rows.numel(), .rows = n_out, .c = c}, init);
      }
      y.release_grad();
    });
  }
  return y;
}

Var concat_rows(const Var& a, const Var& b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  bool same = sa.rank() >= 1 && sa.rank() == sb.rank();
  for (int64_t d = 1; same && d < sa.rank(); ++d) same = sa[d] == sb[d];
  STRETCH_CHECK(same, "concat_rows: " << sa.str() << " and " << sb.str());
  std::vector<int64_t> dims = sa.dims();
  dims[0] += sb[0];
  const int64_t na = a.numel(), nb = b.numel();
  Var y(Tensor::empty(Shape(dims)));
  std::copy_n(a.data(), na, y.data());
  std::copy_n(b.data(), nb, y.data() + na);
  if (needs_grad({&a, &b})) {
    y.set_requires_grad(true);
    tape().push([a, b, y, na, nb] {
      const float* g = y.grad_data();
      if (a.requires_grad()) ops::axpy(a.grad_data(), g, 1.0f, na);
      if (b.requires_grad()) ops::axpy(b.grad_data(), g + na, 1.0f, nb);
      y.release_grad();
    });
  }
  return y;
}

Var slice_rows(const Var& x, int64_t start, int64_t n) {
  const Shape& s = x.shape();
  STRETCH_CHECK(s.rank() >= 1 && start >= 0 && n >= 0 && start + n <= s[0],
                "slice_rows: rows [" << start << ", " << start + n << ") of " << s.str());
  std::vector<int64_t> dims = s.dims();
  dims[0] = n;
  const int64_t row = s[0] > 0 ? x.numel() / s[0] : 0, offset = start * row, count = n * row;
  Var y(Tensor::empty(Shape(dims)));
  std::copy_n(x.data() + offset, count, y.data());
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, offset, count] {
      ops::axpy(x.grad_data() + offset, y.grad_data(), 1.0f, count);
      y.release_grad();
    });
  }
  return y;
}

Var concat_time(const Tensor& memory, const Var& x) {
  const Shape& s = x.shape();  // [B, T, C]
  STRETCH_CHECK(s.rank() == 3 && memory.rank() == 3 && memory.dim(0) == s[0] && memory.dim(2) == s[2],
                "concat_time: memory " << memory.shape().str() << " and x " << s.str());
  const int64_t B = s[0], T = s[1], C = s[2], S = memory.dim(1);
  Var y(Tensor::empty({B, S + T, C}));
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(memory.f32() + b * S * C, S * C, y.data() + b * (S + T) * C);
    std::copy_n(x.data() + b * T * C, T * C, y.data() + (b * (S + T) + S) * C);
  }
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, B, S, T, C] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        for (int64_t b = 0; b < B; ++b) {
          const float* gy = y.grad_data() + (b * (S + T) + S) * C;
          if (init == ops::GradInit::Overwrite) std::copy_n(gy, T * C, g + b * T * C);
          else ops::axpy(g + b * T * C, gy, 1.0f, T * C);
        }
      });
      y.release_grad();
    });
  }
  return y;
}

Var last_time(const Var& x, int64_t n) {
  const Shape& s = x.shape();  // [B, T, C]
  STRETCH_CHECK(s.rank() == 3 && n >= 1 && n <= s[1], "last_time: " << n << " of " << s.str());
  const int64_t B = s[0], T = s[1], C = s[2];
  if (n == T) return x;
  Var y(Tensor::empty({B, n, C}));
  for (int64_t b = 0; b < B; ++b) std::copy_n(x.data() + (b * T + T - n) * C, n * C, y.data() + b * n * C);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, B, T, C, n] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        for (int64_t b = 0; b < B; ++b) {
          float* gx = g + b * T * C;
          const float* gy = y.grad_data() + b * n * C;
          if (init == ops::GradInit::Overwrite) {
            std::fill_n(gx, (T - n) * C, 0.f);
            std::copy_n(gy, n * C, gx + (T - n) * C);
          } else {
            ops::axpy(gx + (T - n) * C, gy, 1.0f, n * C);
          }
        }
      });
      y.release_grad();
    });
  }
  return y;
}

Var split_heads(const Var& x, int64_t heads) {
  const Shape& s = x.shape();  // [B, T, H·D]
  STRETCH_CHECK(s.rank() == 3 && s[2] % heads == 0, "split_heads: " << s.str() << " into " << heads << " heads");
  ops::HeadDims d{.b = s[0], .t = s[1], .h = heads, .d = s[2] / heads};
  Var y(Tensor::empty({d.b, d.h, d.t, d.d}));
  ops::split_heads(y.data(), x.data(), d);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, d] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        if (init == ops::GradInit::Overwrite) {
          ops::merge_heads(g, y.grad_data(), d);
          return;
        }
        Tensor tmp = Tensor::empty(x.shape());
        ops::merge_heads(tmp.f32(), y.grad_data(), d);
        ops::axpy(g, tmp.f32(), 1.0f, x.numel());
      });
      y.release_grad();
    });
  }
  return y;
}

Var merge_heads(const Var& x) {
  const Shape& s = x.shape();  // [B, H, T, D]
  STRETCH_CHECK(s.rank() == 4, "merge_heads: " << s.str());
  ops::HeadDims d{.b = s[0], .t = s[2], .h = s[1], .d = s[3]};
  Var y(Tensor::empty({d.b, d.t, d.h * d.d}));
  ops::merge_heads(y.data(), x.data(), d);
  if (needs_grad({&x})) {
    y.set_requires_grad(true);
    tape().push([x, y, d] {
      store_grad(x, [&](float* g, ops::GradInit init) {
        if (init == ops::GradInit::Overwrite) {
          ops::split_heads(g, y.grad_data(), d);
          return;
        }
        Tensor tmp = Tensor::empty(x.shape());
        ops::split_heads(tmp.f32(), y.grad_data(), d);
        ops::axpy(g, tmp.f32(), 1.0f, x.numel());
      });
      y.release_grad();
    });
  }
  return y;
}

Var cross_entropy(const Var& logits, const Tensor& targets, int32_t ignore_index, ops::Reduction reduction,
                  int64_t* count, LogitsBuffer buffer) {
  const int64_t v = logits.shape()[-1];
  ops::CrossEntropyDims d{.n = logits.numel() / v, .v = v, .ignore_index = ignore_index, .reduction = reduction};
  STRETCH_CHECK(targets.numel() == d.n, "cross_entropy: " << targets.numel() << " targets for " << d.n << " rows");
  if (buffer == LogitsBuffer::ReuseForGradient && needs_grad({&logits}) && !logits.has_grad()) {
    // In place: the logits become exp(x − rowmax) (the softmax itself under Sum, where backward's
    // dloss is 1 in training and the gradient is bitwise the same), then (backward) the gradient,
    // which is then the logits' grad buffer itself.
    const ops::InplaceForm form = reduction == ops::Reduction::Sum ? ops::InplaceForm::Softmax : ops::InplaceForm::Exp;
    Tensor inv_sum = Tensor::empty({d.n});
    ops::CrossEntropyResult r =
        ops::cross_entropy_forward_inplace(logits.data(), inv_sum.f32(), nullptr, nullptr, targets.i32(), d, form);
    if (count) *count = r.count;
    Var loss(Tensor::full({1}, static_cast<float>(r.loss)), true);
    tape().push([logits, targets, inv_sum, loss, d, r, form] {
      ops::cross_entropy_backward_inplace(logits.data(), inv_sum.f32(), targets.i32(), loss.grad_data()[0], r.count,
                                          d, form);
      logits.accumulate_grad(logits.value());
    });
    return loss;
  }
  Tensor lse = Tensor::empty({d.n});
  ops::CrossEntropyResult r = ops::cross_entropy_forward(nullptr, lse.f32(), logits.data(), targets.i32(), d);
  if (count) *count = r.count;
  Var loss(Tensor::full({1}, static_cast<float>(r.loss)));
  if (needs_grad({&logits})) {
    loss.set_requires_grad(true);
    tape().push([logits, targets, lse, loss, d, r] {
      const float dloss = loss.grad_data()[0];
      store_grad(logits, [&](float* g, ops::GradInit init) {
        ops::cross_entropy_backward(g, logits.data(), lse.f32(), targets.i32(), dloss, r.count, d, init);
      });
    });
  }
  return loss;
}

}  // namespace stretch::autograd
