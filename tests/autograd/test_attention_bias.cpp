// tests/autograd/test_attention_bias.cpp — every ops attention bias policy through autograd
// (autograd/attention.h): AlibiSym with the bidirectional mask, ALiBi's Log and Clipped shapes,
// slope_scale ≠ 1 and learnable slopes, through both attention() and attention_qkv().
//   (a) out and the q/k/v gradients equal ops::ref on the same inputs, and the learnable slopes'
//       gradient equals ops::ref's dslopes (kTol/kTolParam, the tolerances of
//       tests/ops/test_attention.cpp: the fast kernel against the reference);
//   (b) the slopes gradient from autograd equals a central finite difference of the float64
//       reference loss L = Σ out ∘ W (W the case's dout) in each slope (step: the exact difference
//       of the two rounded floats x ± 1e-3; truncation ~1e-6 relative, the fp32 kernel's sum
//       ~1e-6: 1e-4 relative to the largest entry; a negated or mis-scaled gradient is O(1));
//   (c) slopes belong to their AttentionInputs: different head counts in one process, and a
//       learnable copy changed in place, never leak into another input (no global state).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/attention.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "ops/alibi.h"
#include "ops/attention.h"
#include "ops/attention_cases.h"

namespace stretch::autograd {
namespace {

using ops::AlibiShape;
using ops::AttentionMask;
using ops::AttentionParams;
using ops::BiasPolicy;
using ops::testing::AttnCase;
using ops::testing::Learn;
using ops::testing::Padding;
using ops::testing::Problem;
using ops::testing::scaled_error;
using ops::testing::to_double;

constexpr double kTol = 1e-5;
constexpr double kTolParam = 2e-5;
constexpr double kTolFd = 1e-4;

Var var_of(const std::vector<float>& x, Shape s, bool requires_grad) {
  Tensor t = Tensor::empty(std::move(s));
  std::copy(x.begin(), x.end(), t.f32());
  return Var(t, requires_grad);
}

std::vector<float> vec(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// The autograd inputs of a case, with its slopes as a Var (learnable iff the case says so).
AttentionInputs inputs_of(const Problem& pb, Var& slopes, Tensor& pad) {
  const AttnCase& c = pb.c;
  AttentionInputs in;
  in.mask = c.mask;
  in.bias = c.bias;
  slopes = var_of(pb.slopes, {c.h}, c.learn == Learn::Yes);
  in.slopes = slopes;
  in.slope_scale = c.slope_scale;
  in.alibi_shape = c.shape;
  in.alibi_cap = c.cap;
  in.window = c.window;
  if (c.padding != Padding::None) {
    pad = Tensor::empty({c.b, c.s}, DType::U8);
    std::copy(pb.pad.begin(), pb.pad.end(), pad.u8());
    in.key_padding = pad;
  }
  in.dropout = c.dropout;
  in.seed = 1234;
  in.stream = 5;
  return in;
}

// Runs backward from out with d(loss)/d(out) = dout.
void backward_with(const Var& out, const std::vector<float>& dout) {
  Var loss(Tensor::zeros({1}), true);
  tape().push([out, dout] { std::copy(dout.begin(), dout.end(), out.grad_data()); });
  tape().backward(loss);
}

// The reference result of a case: out, dq, dk, dv [B,H,·,D] and dslopes [H].
struct Reference {
  std::vector<float> out, dq, dk, dv, dslopes;
};
Reference reference(const Problem& pb) {
  const AttentionParams p = pb.params();
  Reference r;
  std::vector<float> lse(pb.n_rows());
  r.out.resize(pb.n_q());
  ops::ref::attention_forward(r.out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  r.dq.assign(pb.n_q(), 0.f);
  r.dk.assign(pb.n_kv(), 0.f);
  r.dv.assign(pb.n_kv(), 0.f);
  r.dslopes.assign(pb.c.h, 0.f);
  ops::AttentionGrads extra{.dslopes = r.dslopes.data()};
  ops::ref::attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), extra, pb.dout.data(), pb.q.data(),
                               pb.k.data(), pb.v.data(), r.out.data(), lse.data(), p);
  return r;
}

// Central finite differences of the float64 reference loss in each slope.
std::vector<double> fd_slopes(Problem pb) {
  const std::vector<double> q = to_double(pb.q), k = to_double(pb.k), v = to_double(pb.v);
  auto loss = [&] {
    std::vector<double> out(q.size()), lse(pb.n_rows());
    ops::ref::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), pb.params());
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += out[i] * static_cast<double>(pb.dout[i]);
    return l;
  };
  std::vector<double> fd(pb.slopes.size());
  for (size_t i = 0; i < fd.size(); ++i) {
    const float x0 = pb.slopes[i], up = x0 + 1e-3f, dn = x0 - 1e-3f;
    pb.slopes[i] = up;
    const double lp = loss();
    pb.slopes[i] = dn;
    const double lm = loss();
    pb.slopes[i] = x0;
    fd[i] = (lp - lm) / (static_cast<double>(up) - static_cast<double>(dn));
  }
  return fd;
}

// max |a − fd| / max |fd|.
double fd_error(const std::vector<float>& a, const std::vector<double>& fd) {
  double err = 0.0, mag = 1e-12;
  for (size_t i = 0; i < fd.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - fd[i]));
    mag = std::max(mag, std::abs(fd[i]));
  }
  return err / mag;
}

// Checks a learnable slopes gradient against the reference and the finite differences, and that
// the finite-difference comparison would catch a negated gradient.
void expect_slopes_grad(const Problem& pb, const Var& slopes, const Reference& r) {
  ASSERT_TRUE(slopes.has_grad()) << "a learnable slopes Var must receive a gradient";
  const std::vector<float> g = vec(slopes.grad());
  EXPECT_LE(scaled_error(g, r.dslopes), kTolParam) << "dslopes vs ops::ref";
  const std::vector<double> fd = fd_slopes(pb);
  double mag = 0.0;
  for (double x : fd) mag = std::max(mag, std::abs(x));
  EXPECT_GT(mag, 1e-3) << "the slope gradient must not vanish in this case";
  EXPECT_LE(fd_error(g, fd), kTolFd) << "dslopes vs finite differences";
  std::vector<float> negated = g;
  for (float& x : negated) x = -x;
  EXPECT_GT(fd_error(negated, fd), 0.5) << "the finite-difference check must reject a negated gradient";
}

std::vector<AttnCase> cases() {
  using BP = BiasPolicy;
  using AS = AlibiShape;
  const auto bidir = AttentionMask::Bidirectional;
  // S = T so that attention_qkv (no cache) runs every case too.
  return {
      {.name = "alibi_sym_bidir_padding", .b = 2, .h = 3, .t = 7, .s = 7, .d = 4, .mask = bidir, .bias = BP::AlibiSym,
       .padding = Padding::Some, .learn = Learn::Yes},
      {.name = "alibi_sym_bidir_window", .b = 1, .h = 2, .t = 9, .s = 9, .d = 3, .mask = bidir, .bias = BP::AlibiSym,
       .slope_scale = 0.5f, .window = 4, .learn = Learn::Yes},
      {.name = "alibi_log", .b = 1, .h = 2, .t = 8, .s = 8, .d = 4, .bias = BP::Alibi, .shape = AS::Log,
       .learn = Learn::Yes},
      {.name = "alibi_clipped", .b = 2, .h = 2, .t = 8, .s = 8, .d = 3, .bias = BP::Alibi, .shape = AS::Clipped,
       .cap = 2.5f, .learn = Learn::Yes},
      {.name = "alibi_linear_slope_scale", .b = 1, .h = 4, .t = 6, .s = 6, .d = 4, .bias = BP::Alibi,
       .slope_scale = 0.25f, .learn = Learn::Yes},
      {.name = "alibi_log_scaled_dropout", .b = 1, .h = 3, .t = 6, .s = 6, .d = 3, .bias = BP::Alibi, .shape = AS::Log,
       .slope_scale = 2.f, .dropout = 0.3f, .learn = Learn::Yes},
      {.name = "alibi_sym_fixed_slopes", .b = 1, .h = 2, .t = 6, .s = 6, .d = 4, .mask = bidir, .bias = BP::AlibiSym,
       .shape = AS::Clipped, .cap = 3.f, .learn = Learn::No},
  };
}

class AutogradAttentionBias : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AutogradAttentionBias, AttentionMatchesReference) {
  const Problem pb(GetParam());
  const AttnCase& c = pb.c;
  const Reference r = reference(pb);
  Var slopes;
  Tensor pad;
  const AttentionInputs in = inputs_of(pb, slopes, pad);
  Var q = var_of(pb.q, {c.b, c.h, c.t, c.d}, true);
  Var k = var_of(pb.k, {c.b, c.h, c.s, c.d}, true);
  Var v = var_of(pb.v, {c.b, c.h, c.s, c.d}, true);
  Var out = attention(q, k, v, in);
  EXPECT_LE(scaled_error(vec(out.value()), r.out), kTol) << "out";
  backward_with(out, pb.dout);
  EXPECT_LE(scaled_error(vec(q.grad()), r.dq), kTol) << "dq";
  EXPECT_LE(scaled_error(vec(k.grad()), r.dk), kTol) << "dk";
  EXPECT_LE(scaled_error(vec(v.grad()), r.dv), kTol) << "dv";
  if (c.learn == Learn::Yes)
    expect_slopes_grad(pb, slopes, r);
  else
    EXPECT_FALSE(slopes.has_grad()) << "fixed slopes get no gradient";
}

// qkv [B, T, 3·H·D]: block j (q, k, v) at channels j·H·D, head h at h·D within the block.
std::vector<float> pack_qkv(const Problem& pb) {
  const AttnCase& c = pb.c;
  const int64_t HD = c.h * c.d;
  std::vector<float> qkv(c.b * c.t * 3 * HD);
  const std::vector<float>* src[3] = {&pb.q, &pb.k, &pb.v};
  for (int j = 0; j < 3; ++j)
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t h = 0; h < c.h; ++h)
        for (int64_t t = 0; t < c.t; ++t)
          for (int64_t d = 0; d < c.d; ++d)
            qkv[((b * c.t + t) * 3 + j) * HD + h * c.d + d] = (*src[j])[((b * c.h + h) * c.t + t) * c.d + d];
  return qkv;
}

// Block j of x [B, T, blocks·H·D] as [B, H, T, D].
std::vector<float> unpack(const std::vector<float>& x, const AttnCase& c, int blocks, int j) {
  const int64_t HD = c.h * c.d;
  std::vector<float> y(c.b * c.h * c.t * c.d);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t t = 0; t < c.t; ++t)
        for (int64_t d = 0; d < c.d; ++d)
          y[((b * c.h + h) * c.t + t) * c.d + d] = x[((b * c.t + t) * blocks + j) * HD + h * c.d + d];
  return y;
}

TEST_P(AutogradAttentionBias, AttentionQkvMatchesReference) {
  const Problem pb(GetParam());
  const AttnCase& c = pb.c;
  ASSERT_EQ(c.s, c.t);
  const Reference r = reference(pb);
  Var slopes;
  Tensor pad;
  const AttentionInputs in = inputs_of(pb, slopes, pad);
  Var qkv = var_of(pack_qkv(pb), {c.b, c.t, 3 * c.h * c.d}, true);
  Var out = attention_qkv(qkv, c.h, in);  // [B, T, H·D]
  EXPECT_LE(scaled_error(unpack(vec(out.value()), c, 1, 0), r.out), kTol) << "out";
  // dout [B, H, T, D] → [B, T, H·D]
  std::vector<float> dout_bt(pb.dout.size());
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t t = 0; t < c.t; ++t)
        for (int64_t d = 0; d < c.d; ++d)
          dout_bt[(b * c.t + t) * c.h * c.d + h * c.d + d] = pb.dout[((b * c.h + h) * c.t + t) * c.d + d];
  backward_with(out, dout_bt);
  const std::vector<float> g = vec(qkv.grad());
  EXPECT_LE(scaled_error(unpack(g, c, 3, 0), r.dq), kTol) << "dq";
  EXPECT_LE(scaled_error(unpack(g, c, 3, 1), r.dk), kTol) << "dk";
  EXPECT_LE(scaled_error(unpack(g, c, 3, 2), r.dv), kTol) << "dv";
  if (c.learn == Learn::Yes)
    expect_slopes_grad(pb, slopes, r);
  else
    EXPECT_FALSE(slopes.has_grad()) << "fixed slopes get no gradient";
}

// autograd passes the policy through unchanged: bitwise the fast ops kernel on the same params.
TEST_P(AutogradAttentionBias, BitwiseTheOpsKernel) {
  const Problem pb(GetParam());
  const AttnCase& c = pb.c;
  const AttentionParams p = pb.params();
  std::vector<float> out_o(pb.n_q()), lse(pb.n_rows()), dq(pb.n_q(), 0.f), dk(pb.n_kv(), 0.f), dv(pb.n_kv(), 0.f),
      ds(c.h, 0.f);
  ops::attention_forward(out_o.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  ops::attention_backward(dq.data(), dk.data(), dv.data(), {.dslopes = ds.data()}, pb.dout.data(), pb.q.data(),
                          pb.k.data(), pb.v.data(), out_o.data(), lse.data(), p);
  Var slopes;
  Tensor pad;
  const AttentionInputs in = inputs_of(pb, slopes, pad);
  Var q = var_of(pb.q, {c.b, c.h, c.t, c.d}, true);
  Var k = var_of(pb.k, {c.b, c.h, c.s, c.d}, true);
  Var v = var_of(pb.v, {c.b, c.h, c.s, c.d}, true);
  Var out = attention(q, k, v, in);
  backward_with(out, pb.dout);
  EXPECT_EQ(vec(out.value()), out_o);
  EXPECT_EQ(vec(q.grad()), dq);
  EXPECT_EQ(vec(k.grad()), dk);
  EXPECT_EQ(vec(v.grad()), dv);
  if (c.learn == Learn::Yes) {
    EXPECT_EQ(vec(slopes.grad()), ds);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AutogradAttentionBias, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

// S > T (a cached prefix) with a learnable Log-shaped ALiBi through attention().
TEST(AutogradAttentionBias, PrefixKeysLogShape) {
  const Problem pb({.name = "prefix", .b = 2, .h = 3, .t = 4, .s = 9, .d = 4, .bias = BiasPolicy::Alibi,
                    .shape = AlibiShape::Log, .slope_scale = 0.75f, .learn = Learn::Yes});
  const AttnCase& c = pb.c;
  const Reference r = reference(pb);
  Var slopes;
  Tensor pad;
  const AttentionInputs in = inputs_of(pb, slopes, pad);
  Var q = var_of(pb.q, {c.b, c.h, c.t, c.d}, true);
  Var k = var_of(pb.k, {c.b, c.h, c.s, c.d}, true);
  Var v = var_of(pb.v, {c.b, c.h, c.s, c.d}, true);
  Var out = attention(q, k, v, in);
  EXPECT_LE(scaled_error(vec(out.value()), r.out), kTol) << "out";
  backward_with(out, pb.dout);
  EXPECT_LE(scaled_error(vec(q.grad()), r.dq), kTol) << "dq";
  EXPECT_LE(scaled_error(vec(k.grad()), r.dk), kTol) << "dk";
  expect_slopes_grad(pb, slopes, r);
}

// [B, H, R, D] ↔ block j of [B, R, blocks·H·D] (head h at channels h·D of the block), any R.
std::vector<float> to_rows(const std::vector<float>& x, const AttnCase& c, int64_t R, int blocks, int j,
                           std::vector<float> into = {}) {
  const int64_t HD = c.h * c.d;
  if (into.empty()) into.assign(c.b * R * blocks * HD, 0.f);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t d = 0; d < c.d; ++d)
          into[((b * R + r) * blocks + j) * HD + h * c.d + d] = x[((b * c.h + h) * R + r) * c.d + d];
  return into;
}
std::vector<float> from_rows(const std::vector<float>& x, const AttnCase& c, int64_t R, int blocks, int j) {
  const int64_t HD = c.h * c.d;
  std::vector<float> y(c.b * c.h * R * c.d);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t d = 0; d < c.d; ++d)
          y[((b * c.h + h) * R + r) * c.d + d] = x[((b * R + r) * blocks + j) * HD + h * c.d + d];
  return y;
}

// Memory before the segment (S > T): q [B, T, H·D] and kv [B, S, 2·H·D] read in place by
// attention_q_kv (transformer_lm --mem-len), against the reference on the [B, H, ·, D] tensors.
TEST(AutogradAttentionBias, AttentionQKvWithMemoryMatchesReference) {
  const std::vector<AttnCase> memory_cases = {
      {.name = "memory_log_padding", .b = 2, .h = 3, .t = 4, .s = 9, .d = 4, .bias = BiasPolicy::Alibi,
       .shape = AlibiShape::Log, .slope_scale = 0.75f, .padding = Padding::Some, .learn = Learn::Yes},
      {.name = "memory_window_dropout", .b = 1, .h = 2, .t = 5, .s = 11, .d = 3, .bias = BiasPolicy::Alibi,
       .window = 6, .dropout = 0.25f, .learn = Learn::No},
  };
  for (const AttnCase& mc : memory_cases) {
    SCOPED_TRACE(mc.name);
    const Problem pb(mc);
    const AttnCase& c = pb.c;
    const Reference r = reference(pb);
    Var slopes;
    Tensor pad;
    const AttentionInputs in = inputs_of(pb, slopes, pad);
    Var q = var_of(to_rows(pb.q, c, c.t, 1, 0), {c.b, c.t, c.h * c.d}, true);
    Var kv = var_of(to_rows(pb.v, c, c.s, 2, 1, to_rows(pb.k, c, c.s, 2, 0)), {c.b, c.s, 2 * c.h * c.d}, true);
    Var out = attention_q_kv(q, kv, c.h, in);  // [B, T, H·D]
    EXPECT_LE(scaled_error(from_rows(vec(out.value()), c, c.t, 1, 0), r.out), kTol) << "out";
    backward_with(out, to_rows(pb.dout, c, c.t, 1, 0));
    EXPECT_LE(scaled_error(from_rows(vec(q.grad()), c, c.t, 1, 0), r.dq), kTol) << "dq";
    EXPECT_LE(scaled_error(from_rows(vec(kv.grad()), c, c.s, 2, 0), r.dk), kTol) << "dk";
    EXPECT_LE(scaled_error(from_rows(vec(kv.grad()), c, c.s, 2, 1), r.dv), kTol) << "dv";
    if (c.learn == Learn::Yes)
      expect_slopes_grad(pb, slopes, r);
    else
      EXPECT_FALSE(slopes.has_grad()) << "fixed slopes get no gradient";
  }
  const Var q = var_of(std::vector<float>(2 * 5 * 6), {2, 5, 6}, true);
  const Var kv = var_of(std::vector<float>(2 * 4 * 12), {2, 4, 12}, true);
  EXPECT_THROW(attention_q_kv(q, kv, 2, {}), std::exception) << "fewer keys than queries are refused";
}

// Only the slopes learn: q/k/v constants still give the slopes their gradient.
TEST(AutogradAttentionBias, OnlySlopesRequireGrad) {
  const Problem pb({.name = "slopes_only", .b = 1, .h = 2, .t = 6, .s = 6, .d = 4, .bias = BiasPolicy::Alibi,
                    .shape = AlibiShape::Clipped, .cap = 2.f, .learn = Learn::Yes});
  const AttnCase& c = pb.c;
  const Reference r = reference(pb);
  Var slopes;
  Tensor pad;
  const AttentionInputs in = inputs_of(pb, slopes, pad);
  Var qkv = var_of(pack_qkv(pb), {c.b, c.t, 3 * c.h * c.d}, false);
  Var out = attention_qkv(qkv, c.h, in);
  ASSERT_TRUE(out.requires_grad());
  std::vector<float> dout_bt(pb.dout.size());
  for (int64_t h = 0; h < c.h; ++h)
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t d = 0; d < c.d; ++d) dout_bt[t * c.h * c.d + h * c.d + d] = pb.dout[(h * c.t + t) * c.d + d];
  backward_with(out, dout_bt);
  EXPECT_FALSE(qkv.has_grad());
  expect_slopes_grad(pb, slopes, r);
}

// (c) No process-global slopes: inputs with 2, 3 and again 2 heads in one process each use their
// own Var, and changing one learnable slopes Var in place changes nothing for another.
TEST(AutogradAttentionBias, SlopesBelongToTheirInputs) {
  auto run = [](int64_t H, const Var& slopes) {
    Problem pb({.name = "h", .b = 1, .h = H, .t = 5, .s = 5, .d = 4, .bias = BiasPolicy::Alibi});
    pb.slopes = vec(slopes.value());  // the reference reads what the Var holds
    const Reference r = reference(pb);
    AttentionInputs in;
    in.bias = BiasPolicy::Alibi;
    in.slopes = slopes;
    NoGradGuard no_grad;
    Var out = attention(var_of(pb.q, {1, H, 5, 4}, false), var_of(pb.k, {1, H, 5, 4}, false),
                        var_of(pb.v, {1, H, 5, 4}, false), in);
    return scaled_error(vec(out.value()), r.out);
  };
  const Var a2 = alibi_slopes_var(2), a3 = alibi_slopes_var(3), b2 = alibi_slopes_var(2, true);
  EXPECT_EQ(vec(a2.value()), ops::alibi_slopes(2));
  EXPECT_EQ(vec(a3.value()), ops::alibi_slopes(3));
  EXPECT_FALSE(a2.requires_grad());
  EXPECT_TRUE(b2.requires_grad());
  EXPECT_FALSE(a2.same(b2)) << "each call makes a new Var";
  EXPECT_LE(run(2, a2), kTol);
  EXPECT_LE(run(3, a3), kTol);
  b2.data()[0] = 0.9f;  // a learnable copy after an optimizer step
  b2.data()[1] = 0.05f;
  EXPECT_LE(run(2, b2), kTol);
  EXPECT_EQ(vec(a2.value()), ops::alibi_slopes(2)) << "another Var of the same head count is untouched";
  EXPECT_LE(run(2, a2), kTol);
  EXPECT_LE(run(3, a3), kTol);
  // The two 2-head inputs really differ (the check above would not pass by accident).
  Problem pb({.name = "h", .b = 1, .h = 2, .t = 5, .s = 5, .d = 4, .bias = BiasPolicy::Alibi});
  pb.slopes = vec(b2.value());
  const Reference rb = reference(pb);
  pb.slopes = vec(a2.value());
  const Reference ra = reference(pb);
  EXPECT_GT(scaled_error(ra.out, rb.out), 1e-3);
}

TEST(AutogradAttentionBias, MissingOrMisshapedParametersAreErrors) {
  Var q(Tensor::zeros({1, 2, 4, 4}));
  AttentionInputs in;
  in.bias = BiasPolicy::Alibi;
  EXPECT_THROW(attention(q, q, q, in), Error) << "no slopes";
  in.slopes = alibi_slopes_var(3);
  EXPECT_THROW(attention(q, q, q, in), Error) << "slopes for 3 heads, 2 given";
  in.slopes = alibi_slopes_var(2);
  EXPECT_NO_THROW(attention(q, q, q, in));
  in.bias = BiasPolicy::T5;
  EXPECT_THROW(attention(q, q, q, in), Error) << "no table";
  in.t5_table = Var(Tensor::zeros({32, 3}));
  EXPECT_THROW(attention(q, q, q, in), Error) << "table for 3 heads";
  in.t5_table = Var(Tensor::zeros({32, 2}));
  EXPECT_NO_THROW(attention(q, q, q, in));
  in.bias = BiasPolicy::Alibi;
  in.mask = AttentionMask::Bidirectional;
  EXPECT_THROW(attention(q, q, q, in), Error) << "causal-only Alibi with a bidirectional mask (ops check)";
}

}  // namespace
}  // namespace stretch::autograd
