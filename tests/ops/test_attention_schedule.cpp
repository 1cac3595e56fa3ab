// tests/ops/test_attention_schedule.cpp — the backward's two schedules (ops/attention_cpu_backward.cpp): one
// task per (b, h), or key-tile and query-tile tasks when B·H leaves threads idle. The split one
// recomputes P and dS per task and must sum every gradient element over the same terms in the same
// order, so both give bitwise the same dq, dk, dv (and bias gradients), in fp32 and in bf16, for
// accumulating and overwriting calls; and the automatic choice splits where the rule says.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "core/threads.h"
#include "ops/attention.h"
#include "ops/attention_precision.h"
#include "ops/gemm.h"

namespace stretch::ops {
namespace {

using testing::AttnCase;
using testing::Learn;
using testing::Padding;
using testing::PrecisionScope;
using testing::Problem;

constexpr auto kBidir = AttentionMask::Bidirectional;

// Shapes with many tiles per head (the split schedule's tasks), every mask kind, windows that skip
// key tiles, S > T, padding, dropout, odd T (the bf16 path's odd last tile), and learnable biases
// (which keep the head schedule).
std::vector<AttnCase> cases() {
  using BP = BiasPolicy;
  return {
      {.name = "t300_alibi", .b = 1, .h = 1, .t = 300, .s = 300, .d = 32, .bias = BP::Alibi},
      {.name = "t257_s400_none", .b = 1, .h = 1, .t = 257, .s = 400, .d = 16},
      {.name = "t1_s1", .b = 1, .h = 1, .t = 1, .s = 1, .d = 8},
      {.name = "t64_d64", .b = 1, .h = 1, .t = 64, .s = 64, .d = 64, .bias = BP::Alibi},
      {.name = "win70_t333", .b = 1, .h = 1, .t = 333, .s = 333, .d = 16, .bias = BP::Alibi, .window = 70},
      {.name = "win30_s_gt_t", .b = 1, .h = 1, .t = 190, .s = 420, .d = 16, .window = 30},
      {.name = "bidir_sym_pad", .b = 1, .h = 1, .t = 150, .s = 230, .d = 16, .mask = kBidir,
       .bias = BP::AlibiSym, .padding = Padding::Some},
      {.name = "bidir_win_t5_fixed", .b = 1, .h = 1, .t = 140, .s = 200, .d = 8, .mask = kBidir, .bias = BP::T5,
       .window = 50},
      {.name = "all_masked_rows", .b = 1, .h = 1, .t = 130, .s = 140, .d = 8, .bias = BP::Alibi,
       .padding = Padding::AllMasked},
      {.name = "dropout_t200", .b = 1, .h = 1, .t = 200, .s = 200, .d = 16, .bias = BP::Alibi, .dropout = 0.3f},
      {.name = "b1_h3_t199", .b = 1, .h = 3, .t = 199, .s = 199, .d = 24, .bias = BP::Alibi},
      {.name = "learn_alibi_keeps_head", .b = 1, .h = 1, .t = 150, .s = 150, .d = 16, .bias = BP::Alibi,
       .learn = Learn::Yes},
      {.name = "learn_t5_keeps_head", .b = 1, .h = 1, .t = 150, .s = 170, .d = 16, .bias = BP::T5,
       .learn = Learn::Yes},
  };
}

struct Grads {
  std::vector<float> dq, dk, dv, dslopes, dtable;
};

struct ScheduleScope {
  explicit ScheduleScope(BackwardSchedule s) : saved(attention_backward_schedule()) {
    set_attention_backward_schedule(s);
  }
  ~ScheduleScope() { set_attention_backward_schedule(saved); }
  BackwardSchedule saved;
};


// Backward under schedule s: accumulating onto a nonzero start (the += contract), or overwriting
// NaN-filled buffers.
Grads backward(const Problem& pb, BackwardSchedule s, GradInit init) {
  const ScheduleScope scope(s);
  const AttentionParams p = pb.params();
  std::vector<float> out(pb.n_q()), lse(pb.n_rows());
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  const float start = init == GradInit::Overwrite ? NAN : 0.375f;
  Grads g{std::vector<float>(pb.n_q(), start), std::vector<float>(pb.n_kv(), start),
          std::vector<float>(pb.n_kv(), start), std::vector<float>(pb.c.h, 0.f),
          std::vector<float>(pb.table.size(), 0.f)};
  AttentionGrads extra;
  if (pb.c.learn == Learn::Yes) {
    if (pb.c.bias == BiasPolicy::T5) extra.dt5_table = g.dtable.data();
    else extra.dslopes = g.dslopes.data();
  }
  attention_backward(g.dq.data(), g.dk.data(), g.dv.data(), extra, pb.dout.data(), pb.q.data(), pb.k.data(),
                     pb.v.data(), out.data(), lse.data(), p, init);
  return g;
}

void expect_same(const Grads& a, const Grads& b, const std::string& what) {
  auto same = [&](const std::vector<float>& x, const std::vector<float>& y, const char* name) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_FALSE(std::isnan(x[i])) << what << " " << name << "[" << i << "] not written";
      ASSERT_EQ(x[i], y[i]) << what << " " << name << "[" << i << "]";
    }
  };
  same(a.dq, b.dq, "dq");
  same(a.dk, b.dk, "dk");
  same(a.dv, b.dv, "dv");
  same(a.dslopes, b.dslopes, "dslopes");
  same(a.dtable, b.dtable, "dt5_table");
}

class AttentionSchedule : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionSchedule, SplitEqualsHeadBitwiseFp32) {
  const Problem pb(GetParam());
  for (GradInit init : {GradInit::Accumulate, GradInit::Overwrite})
    expect_same(backward(pb, BackwardSchedule::Split, init), backward(pb, BackwardSchedule::Head, init),
                init == GradInit::Overwrite ? "overwrite" : "accumulate");
}

TEST_P(AttentionSchedule, SplitEqualsHeadBitwiseBf16) {
  if (!attention_bf16_supported()) GTEST_SKIP() << "no avx512_bf16: the bf16 kernel does not run here";
  const PrecisionScope bf16(GemmPrecision::Bf16);
  const Problem pb(GetParam());
  for (GradInit init : {GradInit::Accumulate, GradInit::Overwrite})
    expect_same(backward(pb, BackwardSchedule::Split, init), backward(pb, BackwardSchedule::Head, init),
                init == GradInit::Overwrite ? "overwrite" : "accumulate");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionSchedule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

// The rule (ops/attention.h): split where 7·B·H < 5·threads·⌈B·H / threads⌉ and nothing learnable
// or relative sums per head.
TEST(AttentionSchedule, AutomaticChoiceFollowsTheRule) {
  AttentionParams p{.b = 1, .h = 1, .t = 512, .s = 512, .d = 64};
  EXPECT_TRUE(attention_backward_splits(p, 2));
  EXPECT_FALSE(attention_backward_splits(p, 1));
  p.h = 2;
  EXPECT_FALSE(attention_backward_splits(p, 2));
  p.h = 3;  // 21 ≥ 20: two rounds of the head schedule still beat the split's 7/5 of the work
  EXPECT_FALSE(attention_backward_splits(p, 2));
  p.h = 4;
  EXPECT_TRUE(attention_backward_splits(p, 8));
  p.h = 6;
  EXPECT_FALSE(attention_backward_splits(p, 8));
  p.h = 1;
  std::vector<float> slopes{0.5f}, dslopes{0.f};
  p.bias = BiasPolicy::Alibi, p.alibi.slopes = slopes.data();
  EXPECT_TRUE(attention_backward_splits(p, 2));  // fixed slopes: nothing summed per head
  EXPECT_FALSE(attention_backward_splits(p, 2, AttentionGrads{.dslopes = dslopes.data()}));
}

// Under the automatic choice with 2 threads a one-head call takes the split schedule and must give
// what 1 thread (the head schedule) gives.
TEST(AttentionSchedule, OneHeadOnTwoThreadsEqualsOneThread) {
  const Problem pb(AttnCase{.name = "auto", .b = 1, .h = 1, .t = 260, .s = 260, .d = 32,
                            .bias = BiasPolicy::Alibi, .dropout = 0.1f});
  const int saved = num_threads();
  set_num_threads(1);
  const Grads one = backward(pb, BackwardSchedule::Auto, GradInit::Overwrite);
  set_num_threads(2);
  ASSERT_TRUE(attention_backward_splits(pb.params(), 2));
  const Grads two = backward(pb, BackwardSchedule::Auto, GradInit::Overwrite);
  set_num_threads(saved);
  expect_same(two, one, "2 threads vs 1");
}

}  // namespace
}  // namespace stretch::ops
