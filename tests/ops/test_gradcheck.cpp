// tests/ops/test_gradcheck.cpp — float64 central finite-difference gradient checks for every op
// with a gradient. The function is evaluated by the float64 instantiation of the reference, with
// inputs that are exactly representable in float, and L = Σ G ∘ f(x) for a fixed random G:
//   FD error: h = 1e-5 gives truncation h²·|f'''| ≈ 1e-10 and rounding 1e-16·|L|/h ≈ 1e-10.
// Three analytic gradients are compared with it: the float64 reference (tight: 1e-7), and the float
// reference and the fast path (float tolerance). Gradients start at 0.5 and 0.5 is subtracted after,
// so the += (accumulate) contract is checked against the FD too.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "ops/activation.h"
#include "ops/channel_scale.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rope.h"
#include "ops/row_gather.h"

namespace stretch::ops {
namespace {

using VecD = std::vector<double>;
using VecF = std::vector<float>;

constexpr double kStart = 0.5;  // initial value of every gradient buffer (accumulate check)

// Exactly float-representable random doubles.
VecD rand_vec(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Rng rng(seed, 5);
  VecD v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}
VecF to_f(const VecD& v) { return VecF(v.begin(), v.end()); }
VecD start(int64_t n) { return VecD(n, kStart); }
VecF start_f(int64_t n) { return VecF(n, static_cast<float>(kStart)); }
double dot(const VecD& a, const VecD& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss() with respect to x (modified in place and restored).
VecD fd_grad(VecD& x, const std::function<double()>& loss, double h = 1e-5) {
  VecD g(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const double save = x[j];
    x[j] = save + h;
    const double lp = loss();
    x[j] = save - h;
    const double lm = loss();
    x[j] = save;
    g[j] = (lp - lm) / (2 * h);
  }
  return g;
}

// |analytic − kStart − fd| ≤ atol·max(1, max|fd|) + rtol·|fd|
template <class V>
void expect_grad(const char* what, const V& analytic, const VecD& fd, double atol, double rtol) {
  ASSERT_EQ(analytic.size(), fd.size()) << what;
  double scale = 1.0;
  for (double g : fd) scale = std::max(scale, std::abs(g));
  for (size_t j = 0; j < fd.size(); ++j) {
    const double a = static_cast<double>(analytic[j]) - kStart;
    EXPECT_NEAR(a, fd[j], atol * scale + rtol * std::abs(fd[j])) << what << " element " << j;
  }
}

// Tolerances: float64 analytic vs FD — FD error ~1e-10, so 1e-7 is tight and still robust.
constexpr double kAtolD = 1e-7, kRtolD = 1e-7;
// float analytic vs FD — float rounding of forward state and of short sums (≤ 64 terms): ~1e-6·scale;
// 2e-5 leaves margin while a wrong formula is off by O(1).
constexpr double kAtolF = 2e-5, kRtolF = 1e-4;

TEST(GradCheck, Linear) {
  const LinearDims d{.n = 3, .in_features = 5, .out_features = 4};
  VecD x = rand_vec(15, 1), w = rand_vec(20, 2), b = rand_vec(4, 3), G = rand_vec(12, 4);
  auto loss = [&] {
    VecD y(12);
    ref::linear_forward(y.data(), x.data(), w.data(), b.data(), d);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss), fw = fd_grad(w, loss), fb = fd_grad(b, loss);
  VecD dx = start(15), dw = start(20), db = start(4);
  ref::linear_backward(dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), d);
  expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
  expect_grad("ref64 dweight", dw, fw, kAtolD, kRtolD);
  expect_grad("ref64 dbias", db, fb, kAtolD, kRtolD);
  const VecF xf = to_f(x), wf = to_f(w), Gf = to_f(G);
  for (int fast = 0; fast < 2; ++fast) {
    VecF dxf = start_f(15), dwf = start_f(20), dbf = start_f(4);
    if (fast) linear_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), d);
    else ref::linear_backward(dxf.data(), dwf.data(), dbf.data(), Gf.data(), xf.data(), wf.data(), d);
    SCOPED_TRACE(fast ? "fast" : "ref32");
    expect_grad("dinp", dxf, fx, kAtolF, kRtolF);
    expect_grad("dweight", dwf, fw, kAtolF, kRtolF);
    expect_grad("dbias", dbf, fb, kAtolF, kRtolF);
  }
}

TEST(GradCheck, LayerNorm) {
  const LayerNormDims d{.n = 3, .c = 7};
  VecD x = rand_vec(21, 11, -2.f, 2.f), w = rand_vec(7, 12, 0.5f, 1.5f), b = rand_vec(7, 13), G = rand_vec(21, 14);
  auto loss = [&] {
    VecD y(21), m(3), r(3);
    ref::layernorm_forward(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), d);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss), fw = fd_grad(w, loss), fb = fd_grad(b, loss);
  {
    VecD y(21), m(3), r(3), dx = start(21), dw = start(7), db = start(7);
    ref::layernorm_forward(y.data(), m.data(), r.data(), x.data(), w.data(), b.data(), d);
    ref::layernorm_backward(dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), m.data(), r.data(), d);
    expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
    expect_grad("ref64 dweight", dw, fw, kAtolD, kRtolD);
    expect_grad("ref64 dbias", db, fb, kAtolD, kRtolD);
  }
  const VecF xf = to_f(x), wf = to_f(w), bf = to_f(b), Gf = to_f(G);
  for (int fast = 0; fast < 2; ++fast) {
    SCOPED_TRACE(fast ? "fast" : "ref32");
    VecF y(21), m(3), r(3), dx = start_f(21), dw = start_f(7), db = start_f(7);
    if (fast) {
      layernorm_forward(y.data(), m.data(), r.data(), xf.data(), wf.data(), bf.data(), d);
      layernorm_backward(dx.data(), dw.data(), db.data(), Gf.data(), xf.data(), wf.data(), m.data(), r.data(), d);
    } else {
      ref::layernorm_forward(y.data(), m.data(), r.data(), xf.data(), wf.data(), bf.data(), d);
      ref::layernorm_backward(dx.data(), dw.data(), db.data(), Gf.data(), xf.data(), wf.data(), m.data(), r.data(), d);
    }
    expect_grad("dinp", dx, fx, kAtolF, kRtolF);
    expect_grad("dweight", dw, fw, kAtolF, kRtolF);
    expect_grad("dbias", db, fb, kAtolF, kRtolF);
  }
}

void check_activation(Activation act) {
  const int64_t n = 23;
  VecD x = rand_vec(n, 21, -4.f, 4.f), G = rand_vec(n, 22);
  // Nudge away from ReLU's kink: |x| ≥ 0.05 ≫ h, so no difference straddles 0.
  for (auto& v : x)
    if (std::abs(v) < 0.05) v = v < 0 ? -0.05 - std::abs(v) : 0.05 + v;
  auto loss = [&] {
    VecD y(n);
    ref::activation_forward(y.data(), x.data(), n, act);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss);
  VecD dx = start(n);
  ref::activation_backward(dx.data(), G.data(), x.data(), n, act);
  expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
  const VecF xf = to_f(x), Gf = to_f(G);
  VecF d32 = start_f(n), dfast = start_f(n);
  ref::activation_backward(d32.data(), Gf.data(), xf.data(), n, act);
  activation_backward(dfast.data(), Gf.data(), xf.data(), n, act);
  expect_grad("ref32 dinp", d32, fx, kAtolF, kRtolF);
  expect_grad("fast dinp", dfast, fx, kAtolF, kRtolF);
}
TEST(GradCheck, Relu) { check_activation(Activation::Relu); }
TEST(GradCheck, Gelu) { check_activation(Activation::Gelu); }
TEST(GradCheck, GeluAccurate) { check_activation(Activation::GeluAccurate); }
TEST(GradCheck, Tanh) { check_activation(Activation::Tanh); }
TEST(GradCheck, LinearActivation) { check_activation(Activation::Linear); }

TEST(GradCheck, Embedding) {
  const EmbeddingDims d{.n = 6, .v = 4, .c = 3};
  const std::vector<int32_t> ids = {2, 0, 2, 3, 2, 0};  // repeats; row 1 unused (zero gradient)
  const double scale = 2.5;
  VecD table = rand_vec(12, 31), G = rand_vec(18, 32);
  auto loss = [&] {
    VecD y(18);
    ref::embedding_forward(y.data(), ids.data(), table.data(), scale, d);
    return dot(y, G);
  };
  const VecD ft = fd_grad(table, loss);
  VecD dt = start(12);
  ref::embedding_backward(dt.data(), G.data(), ids.data(), scale, d);
  expect_grad("ref64 dtable", dt, ft, kAtolD, kRtolD);
  const VecF Gf = to_f(G);
  VecF d32 = start_f(12), dfast = start_f(12);
  ref::embedding_backward(d32.data(), Gf.data(), ids.data(), static_cast<float>(scale), d);
  embedding_backward(dfast.data(), Gf.data(), ids.data(), static_cast<float>(scale), d);
  expect_grad("ref32 dtable", d32, ft, kAtolF, kRtolF);
  expect_grad("fast dtable", dfast, ft, kAtolF, kRtolF);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(dfast[3 + c], static_cast<float>(kStart)) << "unused row 1 changed";
}

// With a padding row, backward adds nothing into it (torch's padding_idx: not the function's
// gradient, a rule), and the other rows keep the FD gradient.
TEST(GradCheck, EmbeddingPaddingRow) {
  const EmbeddingDims d{.n = 6, .v = 4, .c = 3, .padding_idx = 1};
  const std::vector<int32_t> ids = {2, 1, 2, 3, 1, 0};
  VecD table = rand_vec(12, 33), G = rand_vec(18, 34);
  auto loss = [&] {
    VecD y(18);
    ref::embedding_forward(y.data(), ids.data(), table.data(), 1.0, d);
    return dot(y, G);
  };
  VecD ft = fd_grad(table, loss);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NE(ft[3 + c], 0.0) << "the pad row is used by the forward";
    ft[3 + c] = 0.0;  // ... but gets no gradient
  }
  VecD dt = start(12);
  ref::embedding_backward(dt.data(), G.data(), ids.data(), 1.0, d);
  expect_grad("ref64 dtable", dt, ft, kAtolD, kRtolD);
  const VecF Gf = to_f(G);
  VecF dfast = start_f(12);
  embedding_backward(dfast.data(), Gf.data(), ids.data(), 1.0f, d);
  expect_grad("fast dtable", dfast, ft, kAtolF, kRtolF);
}

// Gather (and its adjoint, the scatter-add that also builds scatter): repeated and unused rows.
TEST(GradCheck, RowGather) {
  const RowGatherDims d{.n = 5, .rows = 4, .c = 3};
  const std::vector<int64_t> rows = {2, 0, 2, 3, 2};  // row 1 unused
  VecD x = rand_vec(12, 35), G = rand_vec(15, 36);
  auto loss = [&] {
    VecD y(15);
    ref::row_gather_forward(y.data(), x.data(), rows.data(), d);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss);
  VecD dx = start(12);
  ref::row_gather_backward(dx.data(), G.data(), rows.data(), d);
  expect_grad("ref64 dx", dx, fx, kAtolD, kRtolD);
  const VecF Gf = to_f(G);
  VecF d32 = start_f(12), dfast = start_f(12);
  ref::row_gather_backward(d32.data(), Gf.data(), rows.data(), d);
  row_gather_backward(dfast.data(), Gf.data(), rows.data(), d);
  expect_grad("ref32 dx", d32, fx, kAtolF, kRtolF);
  expect_grad("fast dx", dfast, fx, kAtolF, kRtolF);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(dfast[3 + c], static_cast<float>(kStart)) << "unused row 1 changed";
  // The scatter's adjoint is the gather: <scatter(g), x> = <g, gather(x)>.
  VecD gx(15);
  ref::row_gather_forward(gx.data(), x.data(), rows.data(), d);
  VecD sc(12, 0.0);
  ref::row_gather_backward(sc.data(), G.data(), rows.data(), d);
  EXPECT_NEAR(dot(sc, x), dot(G, gx), 1e-12);
}

TEST(GradCheck, Dropout) {
  const int64_t n = 37;
  const DropoutParams p{.p = 0.4f, .seed = 9, .stream = 2};  // fixed mask: f is linear in x
  VecD x = rand_vec(n, 41), G = rand_vec(n, 42);
  auto loss = [&] {
    VecD y(n);
    ref::dropout_forward(y.data(), x.data(), n, p);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss);
  int dropped = 0;
  for (int64_t i = 0; i < n; ++i) dropped += fx[i] == 0.0;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, n);
  VecD dx = start(n);
  ref::dropout_backward(dx.data(), G.data(), n, p);
  expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
  const VecF Gf = to_f(G);
  VecF d32 = start_f(n), dfast = start_f(n);
  ref::dropout_backward(d32.data(), Gf.data(), n, p);
  dropout_backward(dfast.data(), Gf.data(), n, p);
  expect_grad("ref32 dinp", d32, fx, kAtolF, kRtolF);
  expect_grad("fast dinp", dfast, fx, kAtolF, kRtolF);
}

// out = res + dropout(inp): ∂/∂res = G (the residual's gradient passes through), ∂/∂inp =
// dropout_backward(G) (what autograd's dropout_add hands each input).
TEST(GradCheck, DropoutAdd) {
  const int64_t n = 41;
  const DropoutParams p{.p = 0.3f, .seed = 11, .stream = 5};
  VecD res = rand_vec(n, 51), x = rand_vec(n, 52), G = rand_vec(n, 53);
  auto loss = [&] {
    VecD y(n);
    ref::dropout_add_forward(y.data(), res.data(), x.data(), n, p);
    return dot(y, G);
  };
  const VecD fres = fd_grad(res, loss), fx = fd_grad(x, loss);
  int dropped = 0;
  for (int64_t i = 0; i < n; ++i) dropped += fx[i] == 0.0;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, n);
  VecD dx = start(n);
  ref::dropout_backward(dx.data(), G.data(), n, p);
  expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(fres[i], G[i], kAtolD) << "dres " << i;
  const VecF Gf = to_f(G);
  VecF dfast = start_f(n);
  dropout_backward(dfast.data(), Gf.data(), n, p);
  expect_grad("fast dinp", dfast, fx, kAtolF, kRtolF);
}

void check_cross_entropy(Reduction red) {
  const CrossEntropyDims d{.n = 5, .v = 7, .ignore_index = 1, .reduction = red};
  const std::vector<int32_t> targets = {3, 1, 0, 6, 1};  // rows 1 and 4 ignored (target == ignore_index)
  const double dloss = 0.75;
  VecD x = rand_vec(35, 51, -3.f, 3.f);
  auto loss = [&] {
    VecD l(5), lse(5);
    return dloss * ref::cross_entropy_forward(l.data(), lse.data(), x.data(), targets.data(), d).loss;
  };
  const VecD fx = fd_grad(x, loss);
  for (int v = 0; v < 7; ++v) {
    EXPECT_EQ(fx[1 * 7 + v], 0.0) << "ignored row has a gradient";
    EXPECT_EQ(fx[4 * 7 + v], 0.0) << "ignored row has a gradient";
  }
  VecD l(5), lse(5), dx = start(35);
  const CrossEntropyResult r = ref::cross_entropy_forward(l.data(), lse.data(), x.data(), targets.data(), d);
  EXPECT_EQ(r.count, 3);
  ref::cross_entropy_backward(dx.data(), x.data(), lse.data(), targets.data(), dloss, r.count, d);
  expect_grad("ref64 dlogits", dx, fx, kAtolD, kRtolD);
  const VecF xf = to_f(x);
  for (int fast = 0; fast < 2; ++fast) {
    SCOPED_TRACE(fast ? "fast" : "ref32");
    VecF lf(5), lsef(5), dxf = start_f(35);
    CrossEntropyResult rf;
    if (fast) {
      rf = cross_entropy_forward(lf.data(), lsef.data(), xf.data(), targets.data(), d);
      cross_entropy_backward(dxf.data(), xf.data(), lsef.data(), targets.data(), 0.75f, rf.count, d);
    } else {
      rf = ref::cross_entropy_forward(lf.data(), lsef.data(), xf.data(), targets.data(), d);
      ref::cross_entropy_backward(dxf.data(), xf.data(), lsef.data(), targets.data(), 0.75f, rf.count, d);
    }
    EXPECT_EQ(rf.count, 3);
    EXPECT_NEAR(rf.loss, r.loss, 1e-5 * std::abs(r.loss));
    expect_grad("dlogits", dxf, fx, kAtolF, kRtolF);
  }
}
TEST(GradCheck, CrossEntropySum) { check_cross_entropy(Reduction::Sum); }
TEST(GradCheck, CrossEntropyMean) { check_cross_entropy(Reduction::Mean); }

TEST(GradCheck, Rope) {
  const RopeDims d{.b = 1, .h = 2, .t = 3, .d = 6, .pos0 = 3};
  const int64_t n = 36;
  VecD x = rand_vec(n, 61), G = rand_vec(n, 62);
  auto loss = [&] {
    VecD y(n);
    ref::rope_forward(y.data(), x.data(), d);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss);
  VecD dx = start(n);
  ref::rope_backward(dx.data(), G.data(), d);
  expect_grad("ref64 dinp", dx, fx, kAtolD, kRtolD);
  const VecF Gf = to_f(G);
  VecF d32 = start_f(n), dfast = start_f(n);
  ref::rope_backward(d32.data(), Gf.data(), d);
  rope_backward(dfast.data(), Gf.data(), d);
  expect_grad("ref32 dinp", d32, fx, kAtolF, kRtolF);
  expect_grad("fast dinp", dfast, fx, kAtolF, kRtolF);
}

// split's backward is merge (and merge's is split); the autograd layer accumulates with axpy.
TEST(GradCheck, SplitMergeHeads) {
  const HeadDims d{.b = 2, .t = 3, .h = 2, .d = 3};
  const int64_t n = 36;
  for (int split = 0; split < 2; ++split) {
    SCOPED_TRACE(split ? "split" : "merge");
    VecD x = rand_vec(n, 71), G = rand_vec(n, 72);
    auto loss = [&] {
      VecD y(n);
      split ? ref::split_heads(y.data(), x.data(), d) : ref::merge_heads(y.data(), x.data(), d);
      return dot(y, G);
    };
    const VecD fx = fd_grad(x, loss);
    VecD g64(n);
    split ? ref::merge_heads(g64.data(), G.data(), d) : ref::split_heads(g64.data(), G.data(), d);
    for (auto& v : g64) v += kStart;
    expect_grad("ref64", g64, fx, kAtolD, kRtolD);
    const VecF Gf = to_f(G);
    VecF gf(n), acc = start_f(n);
    split ? merge_heads(gf.data(), Gf.data(), d) : split_heads(gf.data(), Gf.data(), d);
    axpy(acc.data(), gf.data(), 1.f, n);
    expect_grad("fast", acc, fx, kAtolF, kRtolF);
  }
}

// y = x · w[c / G]: group 1 (NormFormer's w_resid) and group 3 (c_attn with D = 3, 2 heads).
void check_channel_scale(int64_t group) {
  const ChannelScaleDims d{.n = 4, .c = 6, .group = group};
  const int64_t nc = d.n * d.c, g = d.c / group;
  VecD x = rand_vec(nc, 61 + group), w = rand_vec(g, 62 + group, 0.5f, 1.5f), G = rand_vec(nc, 63 + group);
  auto loss = [&] {
    VecD y(nc);
    ref::channel_scale_forward(y.data(), x.data(), w.data(), d);
    return dot(y, G);
  };
  const VecD fx = fd_grad(x, loss), fw = fd_grad(w, loss);
  VecD dx = start(nc), dw = start(g);
  ref::channel_scale_backward(dx.data(), dw.data(), G.data(), x.data(), w.data(), d);
  expect_grad("ref64 dx", dx, fx, kAtolD, kRtolD);
  expect_grad("ref64 dw", dw, fw, kAtolD, kRtolD);
  const VecF xf = to_f(x), wf = to_f(w), Gf = to_f(G);
  for (int fast = 0; fast < 2; ++fast) {
    SCOPED_TRACE(fast ? "fast" : "ref32");
    VecF dxf = start_f(nc), dwf = start_f(g);
    if (fast) channel_scale_backward(dxf.data(), dwf.data(), Gf.data(), xf.data(), wf.data(), d);
    else ref::channel_scale_backward(dxf.data(), dwf.data(), Gf.data(), xf.data(), wf.data(), d);
    expect_grad("dx", dxf, fx, kAtolF, kRtolF);
    expect_grad("dw", dwf, fw, kAtolF, kRtolF);
  }
}

TEST(GradCheck, ChannelScalePerChannel) { check_channel_scale(1); }
TEST(GradCheck, ChannelScalePerGroup) { check_channel_scale(3); }

TEST(GradCheck, Add) {
  const int64_t n = 19;
  VecD a = rand_vec(n, 81), b = rand_vec(n, 82), G = rand_vec(n, 83);
  auto loss = [&] {
    VecD y(n);
    ref::add_forward(y.data(), a.data(), b.data(), n);
    return dot(y, G);
  };
  const VecD fa = fd_grad(a, loss), fb = fd_grad(b, loss);
  // d(a + b)/da = d(a + b)/db = G, accumulated with axpy.
  const VecF Gf = to_f(G);
  VecF da = start_f(n), db = start_f(n);
  axpy(da.data(), Gf.data(), 1.f, n);
  axpy(db.data(), Gf.data(), 1.f, n);
  expect_grad("da", da, fa, kAtolF, 0);
  expect_grad("db", db, fb, kAtolF, 0);
}

}  // namespace
}  // namespace stretch::ops
