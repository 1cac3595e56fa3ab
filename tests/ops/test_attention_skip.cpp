// tests/ops/test_attention_skip.cpp — negligible key tiles (ops/attention_skip.h). With a distance
// penalty the kernel skips (query tile, key tile) pairs whose probabilities all flush to zero,
// from a bound on their scores; skipping must give bitwise what visiting gives (out, lse, dq, dk,
// dv, the slope gradient; fp32 and bf16; both backward schedules), must actually skip where far
// keys are negligible, and must never skip a far key that matters (a large q·k against a steep
// slope, a negative slope) — there the result must still match the float64 reference. Masked
// tiles computed by row blocks up to each block's last visible key: bitwise whole tiles, too.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
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

struct SkipScope {
  explicit SkipScope(TileSkipping s) : saved(attention_tile_skipping()) { set_attention_tile_skipping(s); }
  ~SkipScope() { set_attention_tile_skipping(saved); }
  TileSkipping saved;
};

struct SkipRun {
  std::vector<float> out, lse, dq, dk, dv, dslopes;
  AttentionTileCounts fwd, bwd;
};

SkipRun run(const Problem& pb, TileSkipping s) {
  const SkipScope scope(s);
  const AttentionParams p = pb.params();
  SkipRun r{std::vector<float>(pb.n_q()), std::vector<float>(pb.n_rows()), std::vector<float>(pb.n_q(), 0.f),
        std::vector<float>(pb.n_kv(), 0.f), std::vector<float>(pb.n_kv(), 0.f),
        std::vector<float>(pb.c.h, 0.f), {}, {}};
  attention_tile_counts(true);
  attention_forward(r.out.data(), r.lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  r.fwd = attention_tile_counts(true);
  AttentionGrads extra;
  if (pb.c.learn == Learn::Yes) extra.dslopes = r.dslopes.data();
  attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), extra, pb.dout.data(), pb.q.data(), pb.k.data(),
                     pb.v.data(), r.out.data(), r.lse.data(), p);
  r.bwd = attention_tile_counts(true);
  return r;
}

void expect_bitwise(const SkipRun& a, const SkipRun& b) {
  auto same = [](const std::vector<float>& x, const std::vector<float>& y, const char* name) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))))
        FAIL() << name << "[" << i << "]: skipping " << x[i] << ", visiting " << y[i];
  };
  same(a.out, b.out, "out");
  same(a.lse, b.lse, "lse");
  same(a.dq, b.dq, "dq");
  same(a.dk, b.dk, "dk");
  same(a.dv, b.dv, "dv");
  same(a.dslopes, b.dslopes, "dslopes");
}

// Long enough rows that the steep heads' far tiles are negligible (8 heads: slopes 1/2 .. 1/256,
// |q|, |k| ≈ 2.3 at D = 16), and every variation of the visible set the test must survive.
std::vector<AttnCase> skipping_cases() {
  using BP = BiasPolicy;
  return {
      {.name = "alibi_h8_t700", .b = 1, .h = 8, .t = 700, .s = 700, .d = 16, .bias = BP::Alibi},
      {.name = "alibi_b2_s_gt_t", .b = 2, .h = 4, .t = 333, .s = 901, .d = 16, .bias = BP::Alibi},
      {.name = "alibi_window", .b = 1, .h = 8, .t = 650, .s = 650, .d = 16, .bias = BP::Alibi, .window = 400},
      {.name = "alibi_padding", .b = 2, .h = 8, .t = 600, .s = 640, .d = 16, .bias = BP::Alibi,
       .padding = Padding::Some},
      {.name = "alibi_rows_without_keys", .b = 1, .h = 8, .t = 500, .s = 530, .d = 8, .bias = BP::Alibi,
       .padding = Padding::AllMasked},
      {.name = "alibi_dropout", .b = 1, .h = 8, .t = 600, .s = 600, .d = 16, .bias = BP::Alibi, .dropout = 0.2f},
      {.name = "alibi_learnable", .b = 1, .h = 8, .t = 600, .s = 600, .d = 32, .bias = BP::Alibi,
       .learn = Learn::Yes},
      {.name = "alibi_slope_scale", .b = 1, .h = 8, .t = 700, .s = 700, .d = 16, .bias = BP::Alibi,
       .slope_scale = 0.5f},
      {.name = "alibi_sym_bidir", .b = 1, .h = 8, .t = 600, .s = 600, .d = 16,
       .mask = AttentionMask::Bidirectional, .bias = BP::AlibiSym},
      {.name = "alibi_sym_causal_learn", .b = 1, .h = 8, .t = 600, .s = 600, .d = 16, .bias = BP::AlibiSym,
       .learn = Learn::Yes},
  };
}

class AttentionSkip : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionSkip, SkippingIsBitwiseVisitingFp32) {
  const Problem pb(GetParam());
  const SkipRun off = run(pb, TileSkipping::Off), on = run(pb, TileSkipping::On);
  EXPECT_EQ(off.fwd.skipped, 0);
  EXPECT_EQ(off.bwd.skipped, 0);
  EXPECT_GT(on.fwd.skipped, 0) << "no key tile was negligible: the case does not exercise skipping";
  EXPECT_GT(on.bwd.skipped, 0);
  EXPECT_EQ(on.fwd.visited + on.fwd.skipped, off.fwd.visited);
  EXPECT_EQ(on.bwd.visited + on.bwd.skipped, off.bwd.visited);
  expect_bitwise(on, off);
}

TEST_P(AttentionSkip, SkippingIsBitwiseVisitingBf16) {
  if (!attention_bf16_supported()) GTEST_SKIP() << "no avx512_bf16: the bf16 kernel does not run here";
  const PrecisionScope bf16(GemmPrecision::Bf16);
  const Problem pb(GetParam());
  const SkipRun off = run(pb, TileSkipping::Off), on = run(pb, TileSkipping::On);
  EXPECT_GT(on.fwd.skipped, 0);
  expect_bitwise(on, off);
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionSkip, ::testing::ValuesIn(skipping_cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

// Both backward schedules skip the same pairs (the split one meets each pair twice) and sum the
// same terms.
TEST(AttentionSkipSchedule, SplitAndHeadSchedulesAgreeWithSkipping) {
  const Problem pb(AttnCase{.name = "one_head", .b = 1, .h = 1, .t = 900, .s = 900, .d = 16,
                            .bias = BiasPolicy::Alibi});
  Problem steep = pb;
  steep.slopes = {0.5f};
  const BackwardSchedule saved = attention_backward_schedule();
  set_attention_backward_schedule(BackwardSchedule::Split);
  const SkipRun split = run(steep, TileSkipping::On);
  set_attention_backward_schedule(BackwardSchedule::Head);
  const SkipRun head = run(steep, TileSkipping::On), head_off = run(steep, TileSkipping::Off);
  set_attention_backward_schedule(saved);
  EXPECT_GT(split.bwd.skipped, 0);
  EXPECT_EQ(split.bwd.skipped, 2 * head.bwd.skipped);  // each pair in a key-tile and a query-tile task
  expect_bitwise(split, head);
  expect_bitwise(head, head_off);
}

// The larger of out's and lse's error against the float64 reference, each relative to its scale
// (testing::scaled_error).
double error_against_reference(const Problem& pb, const SkipRun& r) {
  const AttentionParams p = pb.params();
  std::vector<double> out(pb.n_q()), lse(pb.n_rows());
  const auto q = testing::to_double(pb.q), k = testing::to_double(pb.k), v = testing::to_double(pb.v);
  ref::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), p);
  const std::vector<float> out32(out.begin(), out.end()), lse32(lse.begin(), lse.end());
  return std::max(testing::scaled_error(r.out, out32), testing::scaled_error(r.lse, lse32));
}

// One far key that dominates every row despite a steep slope: the query rows and key 0 point the
// same way with large norms, so key 0's score beats the near keys'. A bound that ignored the norms
// (or the sign of the slope) would skip it and get out and lse wrong.
TEST(AttentionSkip, AFarKeyThatMattersIsNeverSkipped) {
  Problem pb(AttnCase{.name = "far_key", .b = 1, .h = 1, .t = 512, .s = 512, .d = 16, .bias = BiasPolicy::Alibi});
  pb.slopes = {0.5f};
  for (int64_t i = 0; i < 512; ++i) pb.q[i * 16] = 12.f;  // q_i·k_0 ≥ 12·100 − 15 while |bias| ≤ 255.5
  for (int64_t x = 0; x < 16; ++x) pb.k[x] = x == 0 ? 100.f : 0.f;
  const SkipRun on = run(pb, TileSkipping::On), off = run(pb, TileSkipping::Off);
  EXPECT_LT(error_against_reference(pb, on), 1e-5);
  expect_bitwise(on, off);
}

// A negative slope rewards distance: the far tiles hold the largest scores and none may be skipped
// as "far"; and a mixed set of slopes skips only where its own bound says so.
TEST(AttentionSkip, NegativeSlopesAreBoundedOnTheirFarSide) {
  Problem pb(AttnCase{.name = "neg", .b = 1, .h = 2, .t = 600, .s = 600, .d = 16, .bias = BiasPolicy::Alibi,
                      .learn = Learn::Yes});
  pb.slopes = {-0.5f, 0.5f};
  const SkipRun on = run(pb, TileSkipping::On), off = run(pb, TileSkipping::Off);
  EXPECT_LT(error_against_reference(pb, on), 1e-5);
  EXPECT_GT(on.fwd.skipped, 0);  // the positive head still skips
  expect_bitwise(on, off);
}

// Policies without a distance bound (none, T5, log/clipped ALiBi) visit every tile.
TEST(AttentionSkip, OnlyLinearAlibiSkips) {
  for (const AttnCase& c :
       {AttnCase{.name = "none", .b = 1, .h = 2, .t = 600, .s = 600, .d = 16},
        AttnCase{.name = "t5", .b = 1, .h = 2, .t = 600, .s = 600, .d = 16, .bias = BiasPolicy::T5},
        AttnCase{.name = "log", .b = 1, .h = 8, .t = 600, .s = 600, .d = 16, .bias = BiasPolicy::Alibi,
                 .shape = AlibiShape::Log}}) {
    const SkipRun on = run(Problem(c), TileSkipping::On);
    EXPECT_EQ(on.fwd.skipped, 0) << c.name;
    EXPECT_EQ(on.bwd.skipped, 0) << c.name;
  }
}

// Masked tiles by row blocks (attention_skip.h, BlockKeys): the products of a masked tile stop at
// the last visible key of each block of rows. Short rows, where most tiles are diagonal ones,
// odd lengths, S > T, windows, padding and dropout, for every policy, fp32 and bf16: bitwise what
// whole tiles give (TileSkipping::Off computes whole tiles).
TEST(AttentionTrim, MaskedTilesByRowBlocksAreBitwiseWholeTiles) {
  using BP = BiasPolicy;
  const std::vector<AttnCase> cases = {
      {.name = "alibi_t128", .b = 2, .h = 4, .t = 128, .s = 128, .d = 64, .bias = BP::Alibi, .learn = Learn::Yes},
      {.name = "alibi_t37", .b = 1, .h = 2, .t = 37, .s = 37, .d = 16, .bias = BP::Alibi},
      {.name = "none_s_gt_t", .b = 1, .h = 2, .t = 70, .s = 150, .d = 32},
      {.name = "t5", .b = 1, .h = 2, .t = 100, .s = 100, .d = 16, .bias = BP::T5, .learn = Learn::Yes},
      {.name = "log_dropout", .b = 1, .h = 4, .t = 90, .s = 90, .d = 16, .bias = BP::Alibi, .shape = AlibiShape::Log,
       .dropout = 0.2f},
      {.name = "sym_window_bidir", .b = 1, .h = 2, .t = 130, .s = 130, .d = 16, .mask = AttentionMask::Bidirectional,
       .bias = BP::AlibiSym, .window = 20},
      {.name = "causal_window", .b = 1, .h = 2, .t = 150, .s = 150, .d = 16, .bias = BP::Alibi, .window = 30},
      {.name = "padding", .b = 2, .h = 2, .t = 77, .s = 77, .d = 16, .bias = BP::Alibi, .padding = Padding::Some},
  };
  for (const bool bf16 : {false, true}) {
    if (bf16 && !attention_bf16_supported()) continue;  // the fp32 pass ran; the bf16 kernel is not built here
    const PrecisionScope precision(bf16 ? GemmPrecision::Bf16 : GemmPrecision::Fp32);
    for (const AttnCase& c : cases) {
      SCOPED_TRACE(c.name + (bf16 ? " bf16" : " fp32"));
      const Problem pb(c);
      expect_bitwise(run(pb, TileSkipping::On), run(pb, TileSkipping::Off));
    }
  }
}

}  // namespace
}  // namespace stretch::ops
