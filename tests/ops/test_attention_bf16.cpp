// tests/ops/test_attention_bf16.cpp — the fused attention's bf16 path (ops::matmul_precision()
// Bf16 on a CPU with avx512_bf16) against (a) the fp32 fast kernel on the same inputs and (b)
// the naive reference on the inputs rounded to bf16, forward and backward (dq, dk, dv, slope and
// T5-table gradients), over edge shapes; and its fallbacks: fp32 where the CPU or build lacks
// avx512_bf16, and for the relative-key term and the soft span mask.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "ops/attention.h"
#include "ops/attention_precision.h"
#include "ops/gemm.h"
#include "relkey_cases.h"
#include "tensor/dtype.h"

namespace stretch::ops {
namespace {

using testing::AttnCase;
using testing::Learn;
using testing::Padding;
using testing::PrecisionScope;
using testing::Problem;
using testing::scaled_error;

// Tolerances (docs/architecture.md, "bf16 attention"), as errors relative to the tensor's largest
// magnitude (scaled_error). bf16 keeps 8 significant bits: each rounding is ≤ 2^−9 relative and
// a dot product of length n over rounded operands is off by ~2^−8·sqrt(n) relative to the size
// of its terms. Inputs here are U(−1, 1), D ≤ 128, S ≤ 200. Measured maxima over this registry
// (Zen 4) in brackets; each tolerance keeps a ≥ 3.5× margin.
//  (a) against fp32 on the same inputs: q, k, v, dout and the kernel's P, P∘Z, dS are rounded.
//      out, lse 1.5e-2 [3.8e-3]; dq, dk, dv 2e-2 [5.2e-3]; slope / table gradients, which sum
//      over all B·T·S scores with cancellation, 5e-2 [1.3e-2].
//  (b) against the reference on the inputs rounded to bf16: only the kernel's own roundings of
//      P, P∘Z and dS remain. lse depends on nothing else than the rounded inputs summed in fp32:
//      1e-6 [1.4e-7, against 5.7e-4 in (a)], so a wrong Q·Kᵀ (a misplaced pair, a tail read past
//      the padding, a stale tile) cannot hide in rounding. The rounding of P (2^−9 relative per
//      probability) is of the same order as that of the inputs, so out and the gradients are only
//      ~2× tighter than in (a): out 1e-2 [2.8e-3]; dq, dk, dv 1.5e-2 [3.2e-3]; parameters 3e-2
//      [7.6e-3].
// The fp32 kernel meets (b)'s reference at 1e-5 (test_attention.cpp).
constexpr double kTolOut32 = 1.5e-2, kTolGrad32 = 2e-2, kTolParam32 = 5e-2;
constexpr double kTolOutRef = 1e-2, kTolLseRef = 1e-6, kTolGradRef = 1.5e-2, kTolParamRef = 3e-2;


std::vector<float> bf16_rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_to_float(float_to_bf16(x[i]));
  return r;
}

struct Result {
  std::vector<float> out, lse, dq, dk, dv, ds, dt;
};

// Forward and backward of pb's case (inputs possibly replaced by rounded copies), fast kernel in
// precision prec, or the reference.
Result run(const Problem& pb, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
           const std::vector<float>& dout, bool reference, GemmPrecision prec) {
  const PrecisionScope scope(prec);
  const AttentionParams p = pb.params();
  Result r{std::vector<float>(pb.n_q()), std::vector<float>(pb.n_rows()), std::vector<float>(pb.n_q(), 0.f),
           std::vector<float>(pb.n_kv(), 0.f), std::vector<float>(pb.n_kv(), 0.f),
           std::vector<float>(pb.c.h, 0.f), std::vector<float>(pb.table.size(), 0.f)};
  const bool learn = pb.c.learn == Learn::Yes;
  AttentionGrads g{learn ? r.ds.data() : nullptr, learn ? r.dt.data() : nullptr};
  if (reference) {
    ref::attention_forward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), p);
    ref::attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), g, dout.data(), q.data(), k.data(), v.data(),
                            r.out.data(), r.lse.data(), p);
  } else {
    attention_forward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), p);
    attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), g, dout.data(), q.data(), k.data(), v.data(),
                       r.out.data(), r.lse.data(), p);
  }
  return r;
}

struct Errors {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0, param = 0;
};
Errors errors(const Result& a, const Result& b, const AttnCase& c) {
  Errors e{scaled_error(a.out, b.out), scaled_error(a.lse, b.lse), scaled_error(a.dq, b.dq),
           scaled_error(a.dk, b.dk), scaled_error(a.dv, b.dv), 0.0};
  if (c.learn == Learn::Yes) e.param = c.bias == BiasPolicy::T5 ? scaled_error(a.dt, b.dt) : scaled_error(a.ds, b.ds);
  return e;
}
void expect_within(const Errors& e, double tol_out, double tol_lse, double tol_grad, double tol_param,
                   const char* what) {
  SCOPED_TRACE(what);
  EXPECT_LE(e.out, tol_out) << "out";
  EXPECT_LE(e.lse, tol_lse) << "lse";
  EXPECT_LE(e.dq, tol_grad) << "dq";
  EXPECT_LE(e.dk, tol_grad) << "dk";
  EXPECT_LE(e.dv, tol_grad) << "dv";
  EXPECT_LE(e.param, tol_param) << "slope / table gradient";
}

std::vector<AttnCase> cases() {
  using BP = BiasPolicy;
  std::vector<AttnCase> v;
  auto add = [&](AttnCase c) { v.push_back(c); };
  add({.name = "t1_s37_alibi_h3", .b = 2, .h = 3, .t = 1, .s = 37, .d = 16, .bias = BP::Alibi});
  add({.name = "t5_h6_alibi", .b = 1, .h = 6, .t = 5, .s = 5, .d = 16, .bias = BP::Alibi, .learn = Learn::Yes});
  add({.name = "t70_h8_d64_alibi", .b = 1, .h = 8, .t = 70, .s = 70, .d = 64, .bias = BP::Alibi,
       .learn = Learn::Yes});
  add({.name = "t67_s131_h4_d32_alibi", .b = 1, .h = 4, .t = 67, .s = 131, .d = 32, .bias = BP::Alibi,
       .learn = Learn::Yes});
  add({.name = "t200_h2_d64_alibi", .b = 2, .h = 2, .t = 200, .s = 200, .d = 64, .bias = BP::Alibi,
       .learn = Learn::Yes});
  add({.name = "t129_h1_d128_none", .b = 1, .h = 1, .t = 129, .s = 129, .d = 128});
  add({.name = "t65_d64_none_bidir", .b = 1, .h = 2, .t = 65, .s = 65, .d = 64, .mask = AttentionMask::Bidirectional});
  add({.name = "d5_none_s_gt_t", .b = 2, .h = 2, .t = 9, .s = 100, .d = 5});
  add({.name = "t45_d33_alibi", .b = 1, .h = 2, .t = 45, .s = 45, .d = 33, .bias = BP::Alibi, .learn = Learn::Yes});
  add({.name = "win40_alibi", .b = 1, .h = 3, .t = 150, .s = 150, .d = 16, .bias = BP::Alibi, .window = 40,
       .learn = Learn::Yes});
  add({.name = "pad_some_none", .b = 2, .h = 2, .t = 70, .s = 80, .d = 16, .padding = Padding::Some});
  add({.name = "all_masked_rows_alibi", .b = 2, .h = 3, .t = 20, .s = 30, .d = 8, .bias = BP::Alibi,
       .padding = Padding::AllMasked, .learn = Learn::Yes});
  add({.name = "bidir_sym_h6", .b = 1, .h = 6, .t = 40, .s = 40, .d = 16, .mask = AttentionMask::Bidirectional,
       .bias = BP::AlibiSym, .learn = Learn::Yes});
  add({.name = "t5_causal", .b = 1, .h = 4, .t = 150, .s = 150, .d = 16, .bias = BP::T5, .learn = Learn::Yes});
  add({.name = "dropout_alibi", .b = 2, .h = 3, .t = 70, .s = 70, .d = 16, .bias = BP::Alibi, .dropout = 0.2f,
       .learn = Learn::Yes});
  return v;
}

class AttentionBf16 : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionBf16, MatchesFp32AndRoundedReference) {
  if (!attention_bf16_supported()) GTEST_SKIP() << "no avx512_bf16 here: covered by RunsFp32WithoutAvx512Bf16";
  const Problem pb(GetParam());
  const Result bf = run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Bf16);
  const Result f32 = run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Fp32);
  const Result ref = run(pb, bf16_rounded(pb.q), bf16_rounded(pb.k), bf16_rounded(pb.v), bf16_rounded(pb.dout), true,
                         GemmPrecision::Fp32);
  const Errors e32 = errors(bf, f32, pb.c), eref = errors(bf, ref, pb.c);
  expect_within(e32, kTolOut32, kTolOut32, kTolGrad32, kTolParam32, "bf16 kernel vs fp32 kernel");
  expect_within(eref, kTolOutRef, kTolLseRef, kTolGradRef, kTolParamRef,
                "bf16 kernel vs reference on bf16-rounded inputs");
  // The bf16 path did run: rounding shows in the output.
  EXPECT_GT(e32.out, 0.0) << "bf16 output bitwise equal to fp32: the bf16 path did not run";
  // Rows with no visible key: exact zeros and −inf, as in fp32.
  for (size_t r = 0; r < pb.n_rows(); ++r)
    if (f32.lse[r] == -INFINITY) {
      EXPECT_EQ(bf.lse[r], -INFINITY);
      for (int64_t d = 0; d < pb.c.d; ++d) EXPECT_EQ(bf.out[r * pb.c.d + d], 0.f);
    }
  for (const auto* x : {&bf.out, &bf.dq, &bf.dk, &bf.dv, &bf.ds, &bf.dt})
    for (float y : *x) ASSERT_TRUE(std::isfinite(y));
  std::printf("stretch-test: %s err vs fp32 out %.2e lse %.2e dq %.2e dk %.2e dv %.2e param %.2e | vs rounded ref "
              "out %.2e lse %.2e dq %.2e dk %.2e dv %.2e param %.2e\n",
              pb.c.name.c_str(), e32.out, e32.lse, e32.dq, e32.dk, e32.dv, e32.param, eref.out, eref.lse, eref.dq,
              eref.dk, eref.dv, eref.param);
}

// Overwrite into NaN-filled gradients equals accumulating into zeros (every element written).
TEST_P(AttentionBf16, OverwriteEqualsAccumulateIntoZeros) {
  if (!attention_bf16_supported()) GTEST_SKIP() << "no avx512_bf16 here";
  const Problem pb(GetParam());
  const PrecisionScope scope(GemmPrecision::Bf16);
  const AttentionParams p = pb.params();
  std::vector<float> out(pb.n_q()), lse(pb.n_rows());
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  std::vector<float> dq0(pb.n_q(), 0.f), dk0(pb.n_kv(), 0.f), dv0(pb.n_kv(), 0.f);
  attention_backward(dq0.data(), dk0.data(), dv0.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                     out.data(), lse.data(), p);
  std::vector<float> dq(pb.n_q(), NAN), dk(pb.n_kv(), NAN), dv(pb.n_kv(), NAN);
  attention_backward(dq.data(), dk.data(), dv.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                     out.data(), lse.data(), p, GradInit::Overwrite);
  EXPECT_EQ(dq, dq0);
  EXPECT_EQ(dk, dk0);
  EXPECT_EQ(dv, dv0);
}

INSTANTIATE_TEST_SUITE_P(Registry, AttentionBf16, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

// Without avx512_bf16 (an AVX2 host, a portable build) bf16 precision leaves attention fp32:
// bitwise the fp32 result. On a host with it, the check that the path is taken is above.
// Forward and backward under Bf16 precision are bitwise the fp32 ones (bf16_products() as set).
void expect_bf16_runs_fp32() {
  const Problem pb(AttnCase{.name = "fallback", .b = 1, .h = 2, .t = 70, .s = 70, .d = 16,
                            .bias = BiasPolicy::Alibi, .learn = Learn::Yes});
  const Result bf = run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Bf16);
  const Result f32 = run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Fp32);
  EXPECT_EQ(bf.out, f32.out);
  EXPECT_EQ(bf.dq, f32.dq);
  EXPECT_EQ(bf.dk, f32.dk);
  EXPECT_EQ(bf.dv, f32.dv);
  EXPECT_EQ(bf.ds, f32.ds);
}

TEST(AttentionBf16Fallback, RunsFp32WithoutAvx512Bf16) {
  if (attention_bf16_supported()) GTEST_SKIP() << "avx512_bf16 here: the bf16 path runs (tested above)";
  expect_bf16_runs_fp32();
}

// Under Bf16Products::Fp32Fma (--bf16 where bf16 products are the slower, cli/bf16_speed.h) the
// attention runs its fp32 path: bitwise the fp32 result, on every host.
TEST(AttentionBf16Fallback, Fp32FmaProductsRunFp32) {
  const Bf16Products saved = bf16_products();
  set_bf16_products(Bf16Products::Fp32Fma);
  expect_bf16_runs_fp32();
  set_bf16_products(saved);
}

// Under Bf16Products::NativeFp32Attention (--bf16 on an AMX CPU whose vdpbf16ps is slower than its
// fp32 FMAs, cli/bf16_speed.h) the attention runs its fp32 path too, on every host; where the bf16
// path exists, Native's result differs from it (so the setting is what switched it).
TEST(AttentionBf16Fallback, NativeFp32AttentionRunsFp32) {
  const Bf16Products saved = bf16_products();
  set_bf16_products(Bf16Products::NativeFp32Attention);
  expect_bf16_runs_fp32();
  set_bf16_products(Bf16Products::Native);
  if (attention_bf16_supported()) {
    const Problem pb(AttnCase{.name = "native", .b = 1, .h = 2, .t = 70, .s = 70, .d = 16, .bias = BiasPolicy::Alibi});
    EXPECT_NE(run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Bf16).out,
              run(pb, pb.q, pb.k, pb.v, pb.dout, false, GemmPrecision::Fp32).out);
  }
  set_bf16_products(saved);
}

// The relative-key term and the soft span mask have no bf16 form yet: those calls run fp32
// under bf16 precision, bitwise the fp32 result (on every host).
TEST(AttentionBf16Fallback, RelKeyAndSpanMaskRunFp32) {
  using testing::RelCase;
  using testing::RelProblem;
  for (const RelCase& c :
       {RelCase{.name = "relkey", .b = 1, .h = 2, .t = 70, .s = 90, .d = 16},
        RelCase{.name = "span", .b = 1, .h = 2, .t = 70, .s = 140, .d = 16, .min_distance = 1, .relkey = false,
                .span_heads = 2, .z0 = 0.3f, .dz = 0.2f, .ramp = 8.f, .max_span = 64}}) {
    SCOPED_TRACE(c.name);
    const RelProblem pb(c);
    const AttentionParams p = pb.params();
    auto fwd_bwd = [&](GemmPrecision prec) {
      const PrecisionScope scope(prec);
      std::vector<float> out(pb.q.size()), lse(pb.n_rows()), dq(pb.q.size(), 0.f), dk(pb.k.size(), 0.f),
          dv(pb.k.size(), 0.f);
      attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
      attention_backward(dq.data(), dk.data(), dv.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                         out.data(), lse.data(), p);
      out.insert(out.end(), dq.begin(), dq.end());
      out.insert(out.end(), dk.begin(), dk.end());
      out.insert(out.end(), dv.begin(), dv.end());
      return out;
    };
    EXPECT_EQ(fwd_bwd(GemmPrecision::Bf16), fwd_bwd(GemmPrecision::Fp32));
  }
}

}  // namespace
}  // namespace stretch::ops
