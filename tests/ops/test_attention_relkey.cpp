// tests/ops/test_attention_relkey.cpp — the attention op's relative-key term and minimum distance
// (ops/attention.h): the fast kernel against the reference (whose forward writes Transformer-XL's
// _rel_shift and Adaptive Span's _skew/_unskew literally and whose backward uses the explicit
// per-(i, j) formula), float64 central finite differences of the reference for q, k, v, R, u, w,
// bitwise thread-count invariance, and attention_check's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "core/error.h"
#include "core/threads.h"
#include "ops/attention.h"
#include "ops/attention_span_mask.h"
#include "relkey_cases.h"

namespace stretch::ops {
namespace {

using testing::RelCase;
using testing::RelProblem;
using testing::rel_err;
using testing::RLayout;
using testing::scaled_error;
using testing::to_double;
using RS = RelKeyShare;

std::vector<RelCase> cases() {
  std::vector<RelCase> v;
  auto add = [&](RelCase c) { v.push_back(c); };
  add({.name = "tiny", .h = 1, .t = 1, .s = 1, .d = 4});
  add({.name = "square", .h = 2, .t = 16, .s = 16});
  add({.name = "memory", .b = 2, .h = 3, .t = 20, .s = 45, .d = 8});
  add({.name = "txl_order_mem", .b = 1, .h = 2, .t = 70, .s = 150, .d = 16, .layout = RLayout::TxlReversed});
  add({.name = "clamp", .b = 1, .h = 2, .t = 33, .s = 90, .d = 8, .clamp = 17, .layout = RLayout::TxlReversed});
  add({.name = "same_length", .b = 2, .h = 2, .t = 67, .s = 131, .d = 8, .window = 64});
  add({.name = "same_length_clamp", .b = 1, .h = 3, .t = 40, .s = 100, .d = 8, .window = 50, .clamp = 30});
  add({.name = "no_u", .h = 2, .t = 30, .s = 50, .u = false});
  add({.name = "no_w", .h = 2, .t = 30, .s = 50, .w = false});
  add({.name = "no_uw", .h = 2, .t = 30, .s = 50, .u = false, .w = false});
  add({.name = "shared", .b = 2, .h = 3, .t = 65, .s = 130, .d = 8, .share = RS::Shared, .u = false, .w = false});
  add({.name = "dropout", .b = 1, .h = 2, .t = 70, .s = 100, .d = 8, .dropout = 0.3f});
  add({.name = "alibi", .b = 1, .h = 2, .t = 40, .s = 70, .d = 8, .bias = BiasPolicy::Alibi});
  add({.name = "long_tiles", .b = 1, .h = 1, .t = 130, .s = 200, .d = 32, .layout = RLayout::TxlReversed});
  // Adaptive Span: distance 0 invisible, key_pe [D, L] shared by all heads, window L + 1.
  add({.name = "span", .b = 2, .h = 2, .t = 24, .s = 56, .d = 8, .window = 33, .min_distance = 1,
       .share = RS::Shared, .layout = RLayout::KeyPe, .u = false, .w = false});
  add({.name = "span_long", .b = 1, .h = 2, .t = 100, .s = 228, .d = 16, .window = 129, .min_distance = 1,
       .share = RS::Shared, .layout = RLayout::KeyPe, .u = false, .w = false, .dropout = 0.2f});
  add({.name = "span_no_cache", .b = 1, .h = 2, .t = 20, .s = 20, .d = 8, .min_distance = 1, .share = RS::Shared,
       .layout = RLayout::KeyPe, .u = false, .w = false});
  add({.name = "min_dist_3_perhead", .b = 1, .h = 2, .t = 70, .s = 90, .d = 8, .min_distance = 3,
       .layout = RLayout::KeyPe});
  add({.name = "min_dist_only", .b = 2, .h = 2, .t = 70, .s = 70, .d = 8, .min_distance = 1, .relkey = false});
  // The soft span mask: after the softmax (fairseq) and as log m before it (original), per head and
  // per layer, with the span's positional keys, dropout, and ramps inside the key range.
  const auto After = SpanMaskMode::AfterSoftmax, Log = SpanMaskMode::LogBeforeSoftmax;
  add({.name = "mask_after", .b = 2, .h = 3, .t = 70, .s = 150, .d = 8, .window = 129, .min_distance = 1,
       .share = RS::Shared, .layout = RLayout::KeyPe, .u = false, .w = false, .span_heads = 3, .z0 = 0.1f,
       .dz = 0.3f, .ramp = 16.f, .max_span = 128});
  add({.name = "mask_after_layer_dropout", .b = 1, .h = 2, .t = 40, .s = 100, .d = 8, .min_distance = 1,
       .dropout = 0.2f, .relkey = false, .span_heads = 1, .z0 = 0.27f, .ramp = 8.f, .max_span = 64});
  add({.name = "mask_log", .b = 2, .h = 3, .t = 70, .s = 200, .d = 8, .window = 129, .min_distance = 1,
       .share = RS::Shared, .layout = RLayout::KeyPe, .u = false, .w = false, .span_heads = 3,
       .span_mode = Log, .z0 = 0.05f, .dz = 0.2f, .ramp = 16.f, .max_span = 128});
  add({.name = "mask_log_narrow", .b = 1, .h = 2, .t = 130, .s = 260, .d = 8, .min_distance = 1, .relkey = false,
       .span_heads = 2, .span_mode = Log, .z0 = 0.1f, .dz = 0.1f, .ramp = 8.f, .max_span = 100});
  add({.name = "mask_zero_span", .b = 1, .h = 2, .t = 20, .s = 40, .d = 8, .min_distance = 1, .relkey = false,
       .span_heads = 2, .span_mode = Log, .z0 = -0.5f, .ramp = 4.f, .max_span = 16});
  add({.name = "mask_after_perhead_relkey", .b = 1, .h = 2, .t = 33, .s = 77, .d = 8, .clamp = 40, .span_heads = 2,
       .span_mode = After, .z0 = 0.2f, .dz = 0.25f, .ramp = 10.f, .max_span = 60});
  return v;
}

struct Result {
  std::vector<float> out, lse, dq, dk, dv, dr, du, dw, dz;
};

enum class Impl : uint8_t { Fast, Ref };

// Forward and backward; gradients accumulate onto the same non-zero starting values.
Result run(const RelProblem& pb, Impl impl) {
  const AttentionParams p = pb.params();
  const size_t nq = pb.q.size(), nkv = pb.k.size();
  Result r{std::vector<float>(nq), std::vector<float>(pb.n_rows()), {}, {}, {}, {}, {}, {}, {}};
  Rng rng(5);
  auto init = [&](size_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = rng.uniform(-0.5f, 0.5f);
    return x;
  };
  r.dq = init(nq), r.dk = init(nkv), r.dv = init(nkv), r.dr = init(pb.rbuf.size()), r.du = init(pb.u.size()),
  r.dw = init(pb.w.size()), r.dz = init(std::max<size_t>(1, pb.z.size()));
  const AttentionGrads g{.drel_r = r.dr.data() + pb.off,
                         .drel_u = r.du.data(),
                         .drel_w = r.dw.data(),
                         .dspan_z = pb.z.empty() ? nullptr : r.dz.data()};
  if (impl == Impl::Fast) {
    attention_forward(r.out.data(), r.lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
    attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), g, pb.dout.data(), pb.q.data(), pb.k.data(),
                       pb.v.data(), r.out.data(), r.lse.data(), p);
  } else {
    ref::attention_forward(r.out.data(), r.lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
    ref::attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), g, pb.dout.data(), pb.q.data(), pb.k.data(),
                            pb.v.data(), r.out.data(), r.lse.data(), p);
  }
  return r;
}

class RelKeyCase : public ::testing::TestWithParam<RelCase> {};

// Tolerances relative to each tensor's largest entry: fp32 tile sums against a double oracle
// (measured ≤ 2e-6 over these cases); a wrong index or a missing term is O(1).
constexpr double kTol = 2e-5;
constexpr double kTolGrad = 1e-4;

TEST_P(RelKeyCase, FastMatchesReference) {
  const RelProblem pb(GetParam());
  const Result f = run(pb, Impl::Fast), r = run(pb, Impl::Ref);
  EXPECT_LE(scaled_error(f.out, r.out), kTol) << "out";
  EXPECT_LE(scaled_error(f.lse, r.lse), kTol) << "lse";
  EXPECT_LE(scaled_error(f.dq, r.dq), kTolGrad) << "dq";
  EXPECT_LE(scaled_error(f.dk, r.dk), kTolGrad) << "dk";
  EXPECT_LE(scaled_error(f.dv, r.dv), kTolGrad) << "dv";
  EXPECT_LE(scaled_error(f.dr, r.dr), kTolGrad) << "dR";
  EXPECT_LE(scaled_error(f.du, r.du), kTolGrad) << "du";
  EXPECT_LE(scaled_error(f.dw, r.dw), kTolGrad) << "dw";
  EXPECT_LE(scaled_error(f.dz, r.dz), kTolGrad) << "dz";
  // Without u (w) its gradient is not computed: the starting values stay.
  Rng rng(5);
  std::vector<float> start(pb.q.size() + 2 * pb.k.size() + pb.rbuf.size() + 2 * pb.u.size());
  for (auto& e : start) e = rng.uniform(-0.5f, 0.5f);
  const size_t at_du = pb.q.size() + 2 * pb.k.size() + pb.rbuf.size(), at_dw = at_du + pb.u.size();
  if (!pb.c.u) {
    EXPECT_TRUE(std::equal(f.du.begin(), f.du.end(), start.begin() + at_du)) << "du written without u";
  }
  if (!pb.c.w) {
    EXPECT_TRUE(std::equal(f.dw.begin(), f.dw.end(), start.begin() + at_dw)) << "dw written without w";
  }
  for (const auto* x : {&f.out, &f.dq, &f.dk, &f.dv, &f.dr, &f.du, &f.dw})
    for (float e : *x) ASSERT_TRUE(std::isfinite(e)) << "non-finite value";
  // Rows with no visible key (min_distance > p_i): out 0, lse −inf, in both.
  for (size_t i = 0; i < f.lse.size(); ++i)
    if (r.lse[i] == -INFINITY) {
      EXPECT_EQ(f.lse[i], -INFINITY) << "row " << i;
      for (int64_t x = 0; x < pb.c.d; ++x) EXPECT_EQ(f.out[i * pb.c.d + x], 0.f) << "row " << i;
    }
}

// Every output element is summed by one thread in a fixed order, and the per-(b, h) partials of
// dR, du and dw are reduced serially: 1, 2 and 3 threads give identical bits.
TEST_P(RelKeyCase, ThreadCountInvariant) {
  const RelProblem pb(GetParam());
  const int saved = num_threads();
  set_num_threads(1);
  const Result one = run(pb, Impl::Fast);
  for (int n : {2, 3}) {
    set_num_threads(n);
    const Result many = run(pb, Impl::Fast);
    EXPECT_EQ(one.out, many.out) << n;
    EXPECT_EQ(one.dq, many.dq) << n;
    EXPECT_EQ(one.dk, many.dk) << n;
    EXPECT_EQ(one.dv, many.dv) << n;
    EXPECT_EQ(one.dr, many.dr) << n;
    EXPECT_EQ(one.du, many.du) << n;
    EXPECT_EQ(one.dw, many.dw) << n;
    EXPECT_EQ(one.dz, many.dz) << n;
  }
  set_num_threads(saved);
}

// Transformer-XL's fused qkv_net over [mem ‖ segment]: q, k, v read in place from one
// [B, S, 3·H·D] buffer (q = its last T rows), out written as [B, T, H·D]; the same bits as packed
// operands (the kernel copies q + u, q + w and R per tile, so only addressing differs).
TEST_P(RelKeyCase, FusedQkvLayoutMatchesPacked) {
  const RelProblem pb(GetParam());
  const AttentionParams p = pb.params();
  const int64_t B = pb.c.b, H = pb.c.h, T = pb.c.t, S = pb.c.s, D = pb.c.d, W3 = 3 * H * D;
  std::vector<float> qkv(B * S * W3, NAN), dqkv(qkv.size(), 0.f), dout2(B * T * H * D), out2(B * T * H * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < S; ++j)
        for (int64_t x = 0; x < D; ++x) {
          const int64_t at = (b * S + j) * W3 + h * D + x;
          qkv[at + H * D] = pb.k[((b * H + h) * S + j) * D + x];
          qkv[at + 2 * H * D] = pb.v[((b * H + h) * S + j) * D + x];
          if (j >= S - T) qkv[at] = pb.q[((b * H + h) * T + (j - (S - T))) * D + x];
        }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t x = 0; x < D; ++x)
          dout2[(b * T + i) * H * D + h * D + x] = pb.dout[((b * H + h) * T + i) * D + x];
    }
  AttentionParams ps = p;
  ps.layout.q = RowStrides{S * W3, D, W3};
  ps.layout.kv = RowStrides{S * W3, D, W3};
  ps.layout.out = RowStrides{T * H * D, D, H * D};
  const float* q2 = qkv.data() + (S - T) * W3;
  std::vector<float> lse2(pb.n_rows()), dr2(pb.rbuf.size(), 0.f), du2(pb.u.size(), 0.f), dw2(pb.w.size(), 0.f);
  std::vector<float> dz2(std::max<size_t>(1, pb.z.size()), 0.f);
  attention_forward(out2.data(), lse2.data(), q2, qkv.data() + H * D, qkv.data() + 2 * H * D, ps);
  const AttentionGrads g2{.drel_r = dr2.data() + pb.off, .drel_u = du2.data(), .drel_w = dw2.data(),
                          .dspan_z = pb.z.empty() ? nullptr : dz2.data()};
  // dq lands in the q rows of dqkv, dk/dv in theirs, accumulated from zeros as below.
  attention_backward(dqkv.data() + (S - T) * W3, dqkv.data() + H * D, dqkv.data() + 2 * H * D, g2, dout2.data(), q2,
                     qkv.data() + H * D, qkv.data() + 2 * H * D, out2.data(), lse2.data(), ps);
  // Packed, from zeros.
  std::vector<float> out(pb.q.size()), lse(pb.n_rows()), dq(pb.q.size(), 0.f), dk(pb.k.size(), 0.f),
      dv(pb.v.size(), 0.f), dr(pb.rbuf.size(), 0.f), du(pb.u.size(), 0.f), dw(pb.w.size(), 0.f), dz(dz2.size(), 0.f);
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  const AttentionGrads g{.drel_r = dr.data() + pb.off, .drel_u = du.data(), .drel_w = dw.data(),
                         .dspan_z = pb.z.empty() ? nullptr : dz.data()};
  attention_backward(dq.data(), dk.data(), dv.data(), g, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                     out.data(), lse.data(), p);
  EXPECT_EQ(lse, lse2);
  EXPECT_EQ(dr, dr2);
  EXPECT_EQ(du, du2);
  EXPECT_EQ(dw, dw2);
  EXPECT_EQ(dz, dz2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i)
        for (int64_t x = 0; x < D; ++x) {
          const int64_t packed = ((b * H + h) * T + i) * D + x;
          ASSERT_EQ(out[packed], out2[(b * T + i) * H * D + h * D + x]) << "out b" << b << " h" << h << " i" << i;
          ASSERT_EQ(dq[packed], dqkv[(b * S + S - T + i) * W3 + h * D + x]) << "dq b" << b << " h" << h << " i" << i;
        }
      for (int64_t j = 0; j < S; ++j)
        for (int64_t x = 0; x < D; ++x) {
          const int64_t packed = ((b * H + h) * S + j) * D + x, at = (b * S + j) * W3 + h * D + x;
          ASSERT_EQ(dk[packed], dqkv[at + H * D]) << "dk b" << b << " h" << h << " j" << j;
          ASSERT_EQ(dv[packed], dqkv[at + 2 * H * D]) << "dv b" << b << " h" << h << " j" << j;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, RelKeyCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<RelCase>& i) { return i.param.name; });

// ---- float64 finite differences of the reference ------------------------------------------------

struct F64 {
  std::vector<double> q, k, v, r, u, w, z;
};

// L = Σ out ∘ dout in double.
double loss(const RelProblem& pb, const AttentionParams& p, const F64& x) {
  std::vector<double> out(x.q.size()), lse(pb.n_rows());
  const ref::RelKeyF64 rel{x.r.data() + pb.off, x.u.data(), x.w.data(), x.z.empty() ? nullptr : x.z.data()};
  ref::attention_forward(out.data(), lse.data(), x.q.data(), x.k.data(), x.v.data(), p, rel);
  double l = 0.0;
  for (size_t i = 0; i < out.size(); ++i) l += out[i] * static_cast<double>(pb.dout[i]);
  return l;
}

class RelKeyGradCheck : public ::testing::TestWithParam<RelCase> {};

// Step 1e-6 in double: truncation ~1e-12, rounding ~1e-10 relative; a wrong term is O(1).
TEST_P(RelKeyGradCheck, ReferenceBackwardMatchesFiniteDifferences) {
  const RelProblem pb(GetParam());
  const AttentionParams p = pb.params();
  F64 x{to_double(pb.q), to_double(pb.k), to_double(pb.v), to_double(pb.rbuf),
        to_double(pb.u),   to_double(pb.w), to_double(pb.z)};
  const std::vector<double> dout = to_double(pb.dout);
  std::vector<double> out(x.q.size()), lse(pb.n_rows());
  const ref::RelKeyF64 rel{x.r.data() + pb.off, x.u.data(), x.w.data(), x.z.empty() ? nullptr : x.z.data()};
  ref::attention_forward(out.data(), lse.data(), x.q.data(), x.k.data(), x.v.data(), p, rel);
  std::vector<double> dq(x.q.size()), dk(x.k.size()), dv(x.v.size()), dr(x.r.size()), du(x.u.size()),
      dw(x.w.size()), dz(x.z.size());
  const ref::AttentionGradsF64 g{.drel_r = dr.data() + pb.off,
                                 .drel_u = du.data(),
                                 .drel_w = dw.data(),
                                 .dspan_z = dz.empty() ? nullptr : dz.data()};
  ref::attention_backward(dq.data(), dk.data(), dv.data(), g, dout.data(), x.q.data(), x.k.data(), x.v.data(),
                          out.data(), lse.data(), p, rel);
  const double h = 1e-6;
  auto fd_of = [&](std::vector<double> F64::*field) {
    std::vector<double> fd((x.*field).size());
    for (size_t i = 0; i < fd.size(); ++i) {
      F64 y = x;
      (y.*field)[i] = (x.*field)[i] + h;
      const double lp = loss(pb, p, y);
      (y.*field)[i] = (x.*field)[i] - h;
      fd[i] = (lp - loss(pb, p, y)) / (2 * h);
    }
    return fd;
  };
  EXPECT_LE(rel_err(fd_of(&F64::q), dq), 1e-6) << "dq";
  EXPECT_LE(rel_err(fd_of(&F64::k), dk), 1e-6) << "dk";
  EXPECT_LE(rel_err(fd_of(&F64::v), dv), 1e-6) << "dv";
  EXPECT_LE(rel_err(fd_of(&F64::r), dr), 1e-6) << "dR";
  if (pb.c.u) {
    EXPECT_LE(rel_err(fd_of(&F64::u), du), 1e-6) << "du";
  }
  if (pb.c.w) {
    EXPECT_LE(rel_err(fd_of(&F64::w), dw), 1e-6) << "dw";
  }
  if (!pb.z.empty()) {
    EXPECT_LE(rel_err(fd_of(&F64::z), dz), 1e-6) << "dz";
    double mz = 0.0;
    for (double e : dz) mz = std::max(mz, std::abs(e));
    EXPECT_GT(mz, 1e-3) << "the case must exercise dz";
  }
  double mag = 0.0;
  for (double e : dr) mag = std::max(mag, std::abs(e));
  if (pb.c.relkey) {
    EXPECT_GT(mag, 1e-3) << "the case must exercise dR";
  }
}

std::vector<RelCase> grad_cases() {
  return {
      {.name = "txl_mem", .b = 1, .h = 2, .t = 5, .s = 9, .d = 4, .layout = RLayout::TxlReversed, .dropout = 0.25f},
      {.name = "clamp_window", .b = 2, .h = 2, .t = 6, .s = 11, .d = 3, .window = 7, .clamp = 4},
      {.name = "shared_alibi", .b = 1, .h = 3, .t = 5, .s = 8, .d = 4, .share = RS::Shared, .bias = BiasPolicy::Alibi},
      {.name = "span", .b = 1, .h = 2, .t = 6, .s = 10, .d = 4, .window = 5, .min_distance = 1, .share = RS::Shared,
       .layout = RLayout::KeyPe, .u = false, .w = false},
      // z·L = 3.02 and 6.98 (L = 16, R = 4): the ramp's ends m = 1 at d − 1 = z·L and m = 0 at
      // d − 1 = R + z·L sit 0.02 from integer distances, off the kinks by far more than the step.
      {.name = "mask_after_edges", .b = 1, .h = 2, .t = 8, .s = 20, .d = 4, .min_distance = 1,
       .share = RS::Shared, .layout = RLayout::KeyPe, .u = false, .w = false, .dropout = 0.2f, .span_heads = 2,
       .z0 = 3.02f / 16, .dz = 3.96f / 16, .ramp = 4.f, .max_span = 16},
      {.name = "mask_log_edges", .b = 1, .h = 2, .t = 8, .s = 20, .d = 4, .min_distance = 1, .relkey = false,
       .span_heads = 2, .span_mode = SpanMaskMode::LogBeforeSoftmax, .z0 = 3.02f / 16, .dz = 3.96f / 16,
       .ramp = 4.f, .max_span = 16},
      {.name = "mask_layer", .b = 2, .h = 2, .t = 6, .s = 14, .d = 4, .min_distance = 1, .relkey = false,
       .span_heads = 1, .z0 = 0.33f, .ramp = 5.f, .max_span = 12},
  };
}
INSTANTIATE_TEST_SUITE_P(Small, RelKeyGradCheck, ::testing::ValuesIn(grad_cases()),
                         [](const ::testing::TestParamInfo<RelCase>& i) { return i.param.name; });

// ---- the distance mapping, by hand --------------------------------------------------------------

// One query, keys at distances 2, 1, 0; q = 0 so only w·R[dist] remains, with R[dist] = dist·e_0
// and w = e_0: score(dist) = scale·dist; D = 1, scale = 1, v_j = j. Then
// P = softmax([2, 1, 0]) over keys j = 0, 1, 2 and out = Σ_j P_j·j. clamp = 1 turns the scores
// into [1, 1, 0].
TEST(RelKeyByHand, DistanceIndexesRows) {
  AttentionParams p;
  p.b = 1, p.h = 1, p.t = 1, p.s = 3, p.d = 1, p.scale = 1.f;
  const std::vector<float> q{0.f}, k{0.f, 0.f, 0.f}, v{0.f, 1.f, 2.f}, r{0.f, 1.f, 2.f}, w{1.f};
  p.relkey = RelKeyOptions{.r = r.data(), .rows = 3, .w = w.data()};
  for (int clamp : {0, 1}) {
    p.relkey.clamp = clamp;
    const double s0 = clamp ? 1.0 : 2.0, s1 = 1.0, s2 = 0.0;
    const double z = std::exp(s0) + std::exp(s1) + std::exp(s2);
    const double want = (std::exp(s1) * 1.0 + std::exp(s2) * 2.0) / z;
    for (int impl = 0; impl < 2; ++impl) {
      float out = 0.f, lse = 0.f;
      if (impl == 0) attention_forward(&out, &lse, q.data(), k.data(), v.data(), p);
      else ref::attention_forward(&out, &lse, q.data(), k.data(), v.data(), p);
      EXPECT_NEAR(out, want, 1e-6) << "clamp " << clamp << " impl " << impl;
      EXPECT_NEAR(lse, std::log(z), 1e-6) << "clamp " << clamp << " impl " << impl;
    }
  }
}

void expect_refused(const AttentionParams& p, const std::string& field) {
  try {
    attention_check(p);
    ADD_FAILURE() << "accepted; expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

// REFERENCE.md §8, "adaptive-mask values at z = 0, R = 32": m(d) = clamp((R + z·L − (d − 1))/R, 0, 1)
// = (32 − (d − 1))/32, so m(1) = 32/32 = 1, m(17) = 16/32 = 0.5, m(33) = 0/32 = 0 and 0 beyond. Seen
// through the op: one query at position 39 of S = 40 keys, q = k = 0 (uniform P over the 39 visible
// keys j = 0..38, distance 39 − j ≥ 1), v_j = e_j (D = S), the mask after the softmax, so
// out[j] = m(39 − j)/39; in the renormalised form out[j] = m(39 − j)/Σ_d m(d) with
// Σ_{d=1..39} m(d) = Σ_{d=1..32} (33 − d)/32 = (32·33/2)/32 = 16.5.
TEST(SpanMaskByHand, ConformanceValuesAtZeroAndRamp32) {
  const SpanMaskOptions o{.ramp = 32.f, .max_span = 8192};
  EXPECT_EQ(span_mask_value(o, 0.0, 1), 1.0);
  EXPECT_EQ(span_mask_value(o, 0.0, 17), 0.5);
  EXPECT_EQ(span_mask_value(o, 0.0, 33), 0.0);
  EXPECT_EQ(span_mask_value(o, 0.0, 34), 0.0);
  const int64_t S = 40;
  AttentionParams p;
  p.b = 1, p.h = 1, p.t = 1, p.s = S, p.d = S, p.min_distance = 1;
  const float z = 0.f;
  p.span = SpanMaskOptions{.z = &z, .heads = 1, .ramp = 32.f, .max_span = 8192};
  std::vector<float> q(S, 0.f), k(S * S, 0.f), v(S * S, 0.f), out(S);
  for (int64_t j = 0; j < S; ++j) v[j * S + j] = 1.f;
  for (auto mode : {SpanMaskMode::AfterSoftmax, SpanMaskMode::LogBeforeSoftmax}) {
    p.span.mode = mode;
    const double norm = mode == SpanMaskMode::AfterSoftmax ? 39.0 : 16.5;
    for (int impl = 0; impl < 2; ++impl) {
      float lse = 0.f;
      if (impl == 0) attention_forward(out.data(), &lse, q.data(), k.data(), v.data(), p);
      else ref::attention_forward(out.data(), &lse, q.data(), k.data(), v.data(), p);
      EXPECT_NEAR(out[39 - 1], 1.0 / norm, 1e-6) << "d = 1";
      EXPECT_NEAR(out[39 - 17], 0.5 / norm, 1e-6) << "d = 17";
      for (int64_t d = 33; d <= 39; ++d) EXPECT_EQ(out[39 - d], 0.f) << "d = " << d;
      EXPECT_EQ(out[39], 0.f) << "distance 0 is never attended";
      EXPECT_NEAR(lse, std::log(mode == SpanMaskMode::AfterSoftmax ? 39.0 : 16.5), 1e-5);
    }
  }
}

// ∂L/∂z at the ramp's ends (SpanMaskEdges). The setting above (one query, 39 visible keys, uniform
// P = 1/39, v_j = e_j) with dout = 1 everywhere: ∂L/∂z = Σ_j P_j·(dout·v_j)·∂m/∂z(d_j) = (1/39)·(L/R)·n,
// n = the distances where ∂m/∂z = L/R. At z = 0, R = 32, x = (32 − (d − 1))/32: x = 1 at d = 1, x = 0
// at d = 33. Open (0 < x < 1): d = 2..32, n = 31; Closed (torch's clamp, 0 ≤ x ≤ 1): d = 1..33, n = 33.
// The renormalised form keeps the lower end open (m = 0 is an invisible key): n = 32 with Closed.
TEST(SpanMaskByHand, GradientAtTheRampEndsFollowsTheEdgeRule) {
  const int64_t S = 40;
  AttentionParams p;
  p.b = 1, p.h = 1, p.t = 1, p.s = S, p.d = S, p.min_distance = 1;
  const float z = 0.f;
  p.span = SpanMaskOptions{.z = &z, .heads = 1, .ramp = 32.f, .max_span = 8192};
  std::vector<float> q(S, 0.f), k(S * S, 0.f), v(S * S, 0.f), out(S), dout(S, 1.f);
  for (int64_t j = 0; j < S; ++j) v[j * S + j] = 1.f;
  const double LR = 8192.0 / 32.0;
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 1), 0.0);
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 33), 0.0);
  p.span.edges = SpanMaskEdges::Closed;
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 1), LR);
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 33), LR);
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 34), 0.0);
  for (auto edges : {SpanMaskEdges::Open, SpanMaskEdges::Closed}) {
    {
      p.span.edges = edges;
      const double n = edges == SpanMaskEdges::Closed ? 33.0 : 31.0;
      for (int impl = 0; impl < 2; ++impl) {
        float lse = 0.f, dz = 0.f;
        std::vector<float> dq(S, 0.f), dk(S * S, 0.f), dv(S * S, 0.f);
        AttentionGrads g;
        g.dspan_z = &dz;
        if (impl == 0) {
          attention_forward(out.data(), &lse, q.data(), k.data(), v.data(), p);
          attention_backward(dq.data(), dk.data(), dv.data(), g, dout.data(), q.data(), k.data(), v.data(), out.data(),
                             &lse, p);
        } else {
          ref::attention_forward(out.data(), &lse, q.data(), k.data(), v.data(), p);
          ref::attention_backward(dq.data(), dk.data(), dv.data(), g, dout.data(), q.data(), k.data(), v.data(),
                                  out.data(), &lse, p);
        }
        EXPECT_NEAR(dz, n / 39.0 * LR, 1e-3) << "impl " << impl << " closed " << (edges == SpanMaskEdges::Closed);
      }
    }
  }
  p.span.mode = SpanMaskMode::LogBeforeSoftmax;
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 1), LR);   // upper end closed
  EXPECT_EQ(span_mask_dz(p.span, 0.0, 33), 0.0);  // m = 0: invisible, stays open
}

// The renormalised form skips keys where every head's m is 0: R = 4, L = 16, z = (0.3, 0.1):
// m_h(d) > 0 iff d − 1 < R + z_h·L, i.e. d < 9.8 for the larger z, so the window is 10.
TEST(SpanMaskByHand, RenormalisedWindowFollowsTheLargestSpan) {
  const std::vector<float> z{0.3f, 0.1f};
  AttentionParams p;
  p.b = 1, p.h = 2, p.t = 4, p.s = 300, p.d = 4, p.min_distance = 1;
  p.span = SpanMaskOptions{.z = z.data(), .heads = 2, .ramp = 4.f, .max_span = 16,
                           .mode = SpanMaskMode::LogBeforeSoftmax};
  EXPECT_GT(span_mask_value(p.span, 0.3, 9), 0.0);
  EXPECT_EQ(span_mask_value(p.span, 0.3, 10), 0.0);
  EXPECT_EQ(attn::span_effective_window(p), 10);
  // R then needs rows only for distances 1..9: accepted here, refused once the mask stops narrowing.
  const std::vector<float> pe(9 * 4, 0.5f);
  p.relkey = RelKeyOptions{.r = pe.data(), .rows = 9, .dist0 = 1, .share = RelKeyShare::Shared};
  attention_check(p);
  p.span.mode = SpanMaskMode::AfterSoftmax;
  expect_refused(p, "relkey.rows");
  p.span.mode = SpanMaskMode::LogBeforeSoftmax;
  p.relkey = RelKeyOptions{};
  p.window = 7;
  EXPECT_EQ(attn::span_effective_window(p), 7);
  p.span.mode = SpanMaskMode::AfterSoftmax;  // keys with m = 0 still count in the normaliser
  EXPECT_EQ(attn::span_effective_window(p), 7);
  p.window = 0;
  EXPECT_EQ(attn::span_effective_window(p), 0);
}

// ---- refusals -----------------------------------------------------------------------------------

TEST(RelKeyCheck, RefusesInconsistentOptions) {
  const RelProblem pb(RelCase{.name = "x", .h = 2, .t = 8, .s = 12});
  AttentionParams p = pb.params();
  attention_check(p);  // the base case is fine
  AttentionParams a = p;
  a.mask = AttentionMask::Bidirectional;
  expect_refused(a, "relkey");
  a = p;
  a.relkey.rows = pb.rows - 1;  // distance S − 1 has no row
  expect_refused(a, "relkey.rows");
  a.relkey.clamp = pb.rows - 2;  // with a clamp it has
  attention_check(a);
  a = p;
  a.relkey.dist0 = 1;  // distance 0 is visible
  expect_refused(a, "relkey.dist0");
  a = p;
  a.relkey.r = nullptr;
  expect_refused(a, "relkey.u");
  a = p;
  a.relkey.row_stride = 16;  // elem stride 0
  expect_refused(a, "relkey strides");
  a = p;
  a.relkey.clamp = -1;
  expect_refused(a, "relkey.clamp");
  a = p;
  a.relkey = RelKeyOptions{};
  a.min_distance = -1;
  expect_refused(a, "min_distance");
  a.min_distance = 1;
  a.mask = AttentionMask::Bidirectional;
  expect_refused(a, "min_distance");
  a = p;
  const std::vector<float> z{0.1f, 0.2f, 0.3f}, bad{0.1f, NAN};
  a.span = SpanMaskOptions{.z = z.data(), .heads = 3, .ramp = 4.f, .max_span = 16};
  expect_refused(a, "span.heads");
  a.span.heads = 2, a.span.ramp = 0.f;
  expect_refused(a, "span.ramp");
  a.span.ramp = 4.f, a.span.max_span = 0;
  expect_refused(a, "span.max_span");
  a.span.max_span = 16, a.span.z = bad.data();
  expect_refused(a, "span.z");
  a.span.z = z.data();
  attention_check(a);
}

}  // namespace
}  // namespace stretch::ops
