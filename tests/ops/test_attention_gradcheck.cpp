// tests/ops/test_attention_gradcheck.cpp — float64 central finite differences of the
// reference attention (its double-precision evaluation) against its analytic backward, for
// q, k, v, the ALiBi slopes and the T5 table. The fast kernel is tied to the reference by
// test_attention.cpp, so both are checked against the definition of the derivative.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention_cases.h"
#include "ops/attention.h"

namespace stretch::ops {
namespace {

using testing::AttnCase;
using testing::Learn;
using testing::Padding;
using testing::Problem;
using testing::rel_err;
using testing::to_double;

// L = Σ out ∘ W with W = the case's dout, evaluated in double.
double loss(const Problem& pb, const AttentionParams& p, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v) {
  std::vector<double> out(q.size()), lse(pb.n_rows());
  ref::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p);
  double l = 0.0;
  for (size_t i = 0; i < out.size(); ++i) l += out[i] * static_cast<double>(pb.dout[i]);
  return l;
}

class AttentionGradCheck : public ::testing::TestWithParam<AttnCase> {};

// Tolerances. Inputs q/k/v are double: step 1e-6 gives truncation ~1e-12·L''' and rounding
// ~1e-16·|L|/1e-6 = 1e-10, so 1e-6 relative leaves a wide margin (a wrong gradient term is
// O(1) relative). Slopes and table are float parameters: the step is the exact difference of
// the two rounded floats (no rounding error), 1e-3 wide: truncation ~1e-6·L'''/6 relative,
// hence 1e-5.
TEST_P(AttentionGradCheck, ReferenceBackwardMatchesFiniteDifferences) {
  Problem pb(GetParam());
  const AttentionParams p = pb.params();
  const std::vector<double> q = to_double(pb.q), k = to_double(pb.k), v = to_double(pb.v);
  const std::vector<double> dout = to_double(pb.dout);

  std::vector<double> out(q.size()), lse(pb.n_rows());
  ref::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p);
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  std::vector<double> dsl(pb.c.h, 0.0), dtab(pb.table.size(), 0.0);
  ref::AttentionGradsF64 extra{dsl.data(), dtab.data()};
  ref::attention_backward(dq.data(), dk.data(), dv.data(), extra, dout.data(), q.data(), k.data(), v.data(),
                          out.data(), lse.data(), p);

  const double h = 1e-6;
  auto fd_of = [&](const std::vector<double>& x0, int which) {
    std::vector<double> fd(x0.size());
    for (size_t i = 0; i < x0.size(); ++i) {
      std::vector<double> qq = q, kk = k, vv = v;
      std::vector<double>& x = which == 0 ? qq : which == 1 ? kk : vv;
      x[i] = x0[i] + h;
      const double lp = loss(pb, p, qq, kk, vv);
      x[i] = x0[i] - h;
      const double lm = loss(pb, p, qq, kk, vv);
      fd[i] = (lp - lm) / (2 * h);
    }
    return fd;
  };
  EXPECT_LE(rel_err(fd_of(q, 0), dq), 1e-6) << "dq";
  EXPECT_LE(rel_err(fd_of(k, 1), dk), 1e-6) << "dk";
  EXPECT_LE(rel_err(fd_of(v, 2), dv), 1e-6) << "dv";

  // Float parameters: perturb, and divide by the exact difference of the rounded values.
  auto fd_param = [&](std::vector<float>& param) {
    std::vector<double> fd(param.size());
    for (size_t i = 0; i < param.size(); ++i) {
      const float x0 = param[i];
      const float up = x0 + 1e-3f, dn = x0 - 1e-3f;
      param[i] = up;
      const double lp = loss(pb, pb.params(), q, k, v);
      param[i] = dn;
      const double lm = loss(pb, pb.params(), q, k, v);
      param[i] = x0;
      fd[i] = (lp - lm) / (static_cast<double>(up) - static_cast<double>(dn));
    }
    return fd;
  };
  if (pb.c.bias == BiasPolicy::Alibi || pb.c.bias == BiasPolicy::AlibiSym) {
    const std::vector<double> fd = fd_param(pb.slopes);
    EXPECT_LE(rel_err(fd, dsl), 1e-5) << "dslopes";
    double mag = 0.0;
    for (double x : dsl) mag = std::max(mag, std::abs(x));
    EXPECT_GT(mag, 1e-3) << "the slope gradient must not vanish in this case";
  }
  if (pb.c.bias == BiasPolicy::T5) {
    const std::vector<double> fd = fd_param(pb.table);
    EXPECT_LE(rel_err(fd, dtab), 1e-5) << "dt5_table";
  }
}

std::vector<AttnCase> fd_cases() {
  using BP = BiasPolicy;
  using AS = AlibiShape;
  const auto bidir = AttentionMask::Bidirectional;
  return {
      {.name = "none_s_gt_t", .b = 1, .h = 2, .t = 4, .s = 7, .d = 3},
      {.name = "alibi_window_masked_rows", .b = 2, .h = 3, .t = 6, .s = 8, .d = 3, .bias = BP::Alibi, .window = 4,
       .padding = Padding::AllMasked, .learn = Learn::Yes},
      {.name = "alibi_log_scaled", .b = 1, .h = 2, .t = 5, .s = 6, .d = 4, .bias = BP::Alibi, .shape = AS::Log,
       .slope_scale = 0.5f, .learn = Learn::Yes},
      {.name = "alibi_clipped", .b = 1, .h = 2, .t = 6, .s = 6, .d = 3, .bias = BP::Alibi, .shape = AS::Clipped,
       .cap = 2.5f, .learn = Learn::Yes},
      {.name = "bidir_sym_padding", .b = 2, .h = 2, .t = 5, .s = 7, .d = 3, .mask = bidir, .bias = BP::AlibiSym,
       .padding = Padding::Some, .learn = Learn::Yes},
      {.name = "t5_causal", .b = 1, .h = 2, .t = 6, .s = 9, .d = 3, .bias = BP::T5, .num_buckets = 8,
       .max_distance = 12, .learn = Learn::Yes},
      {.name = "t5_bidir", .b = 1, .h = 2, .t = 5, .s = 7, .d = 3, .mask = bidir, .bias = BP::T5, .num_buckets = 8,
       .max_distance = 12, .learn = Learn::Yes},
      {.name = "dropout_alibi", .b = 1, .h = 3, .t = 6, .s = 6, .d = 3, .bias = BP::Alibi, .dropout = 0.3f,
       .learn = Learn::Yes},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionGradCheck, ::testing::ValuesIn(fd_cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

}  // namespace
}  // namespace stretch::ops
