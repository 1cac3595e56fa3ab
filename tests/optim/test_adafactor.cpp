// tests/optim/test_adafactor.cpp — fairseq's Adafactor (optim/adafactor.cpp) against updates
// computed by hand from fairseq/optim/adafactor.py's formulas (the arithmetic is written in
// the comments), its state layout per shape, and its config checks. The comparison with
// fairseq's own class on many steps and flag combinations is tests/fairseq/check_adafactor.py.
//
// Tolerance: float32 arithmetic against exact decimals, values O(1): kF32Tol = 1e-6 (a few
// roundings of ≤ 6e-8).
#include <gtest/gtest.h>

#include "testing.h"

#include <cmath>
#include <vector>

#include "optim/optimizer.h"

namespace stretch::optim {
namespace {

constexpr double kF32Tol = 1e-6;
using stretch::testing::error_of;

struct Param {
  std::string name;
  std::vector<float> value, grad;
  std::vector<int64_t> shape;
  OptimParam view() { return {name, value.data(), grad.data(), static_cast<int64_t>(value.size()), shape}; }
};

OptimizerConfig adafactor(OptimizerConfig c = {}) {
  c.kind = OptimizerKind::Adafactor;
  return c;
}

TEST(Adafactor, FactoredFirstStepByHand) {
  // p = 0 [2, 2], g = [[1, 2], [3, 4]], lr 0.1, t = 1: β2t = 1 − 1^−0.8 = 0, so
  //   row = mean over C of g² = [(1+4)/2, (9+16)/2] = [2.5, 12.5];  col = mean over R = [5, 10]
  //   r = rsqrt(row / mean(row)) = rsqrt([2.5/7.5, 12.5/7.5]) = [√3, √0.6];  c = [1/√5, 1/√10]
  //   u = r_i·c_j·g_ij = [[√(3/5), 2√(3/10)], [3√(0.6/5), 4√(0.6/10)]]
  //   RMS(u) = √((0.6 + 1.2 + 1.08 + 0.96)/4) = √0.96 < 1: no clip;  p = −0.1·u
  auto opt = make_optimizer(adafactor());
  Param p{"w", {0, 0, 0, 0}, {1, 2, 3, 4}, {2, 2}};
  OptimParam v = p.view();
  opt->step(std::span<const OptimParam>(&v, 1), 0.1);
  const double u[4] = {std::sqrt(0.6), 2 * std::sqrt(0.3), 3 * std::sqrt(0.12), 4 * std::sqrt(0.06)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p.value[i], -0.1 * u[i], kF32Tol) << i;
  const OptimizerState sd = opt->state_dict();
  ASSERT_EQ(sd.tensors.size(), 2u);
  EXPECT_EQ(sd.tensors[0].first, "w.exp_avg_sq_row");
  EXPECT_EQ(sd.tensors[1].first, "w.exp_avg_sq_col");
  EXPECT_NEAR(sd.tensors[0].second.f32()[0], 2.5, kF32Tol);
  EXPECT_NEAR(sd.tensors[0].second.f32()[1], 12.5, kF32Tol);
  EXPECT_NEAR(sd.tensors[1].second.f32()[0], 5.0, kF32Tol);
  EXPECT_NEAR(sd.tensors[1].second.f32()[1], 10.0, kF32Tol);
}

TEST(Adafactor, FactorsTheLastTwoDims) {
  // [2, 3, 4]: rows [2·3], columns [2·4] (fairseq: shape[:-1] and shape[:-2] + shape[-1:]);
  // [4, 3] transposed gives rows 4 and columns 3 (the [out, in] convention matters).
  auto opt = make_optimizer(adafactor({.adafactor_beta1 = 0.5}));
  std::vector<Param> ps{{"a", std::vector<float>(24, 1.0f), std::vector<float>(24, 0.5f), {2, 3, 4}},
                        {"b", std::vector<float>(12, 1.0f), std::vector<float>(12, 0.5f), {4, 3}},
                        {"c", std::vector<float>(5, 1.0f), std::vector<float>(5, 0.5f), {}}};
  std::vector<OptimParam> views;
  for (auto& p : ps) views.push_back(p.view());
  opt->step(views, 0.01);
  std::map<std::string, int64_t> sizes;
  for (const auto& [n, t] : opt->state_dict().tensors) sizes[n] = t.numel();
  const std::map<std::string, int64_t> want = {
      {"a.exp_avg", 24}, {"a.exp_avg_sq_row", 6}, {"a.exp_avg_sq_col", 8}, {"b.exp_avg", 12}, {"b.exp_avg_sq_row", 4},
      {"b.exp_avg_sq_col", 3}, {"c.exp_avg", 5}, {"c.exp_avg_sq", 5}};
  EXPECT_EQ(sizes, want);
}

TEST(Adafactor, VectorClipFirstMomentAndWeightDecayByHand) {
  // g = [3, −4], t = 1: v = g² (β2t = 0), u = g/|g| = [1, −1], RMS(u) = 1 > clip 0.5: u /= 2;
  // u ·= lr 0.1 → [0.05, −0.05]; β1 = 0.9: m = 0.1·u = [0.005, −0.005]; wd 0.5: p += −0.05·p;
  // p = [2, 2]·0.95 − m = [1.895, 1.905].
  auto opt = make_optimizer(adafactor({.weight_decay = 0.5, .clip_threshold = 0.5, .adafactor_beta1 = 0.9}));
  Param p{"w", {2, 2}, {3, -4}, {}};
  OptimParam v = p.view();
  opt->step(std::span<const OptimParam>(&v, 1), 0.1);
  EXPECT_NEAR(p.value[0], 1.895, kF32Tol);
  EXPECT_NEAR(p.value[1], 1.905, kF32Tol);
  // t = 2, g = [3, −4] again: β2t = 1 − 2^−0.8; v stays g² (an average of equal values), u = [1, −1]
  // clipped to [0.5, −0.5], ·0.1; m = 0.9·m + 0.1·[0.05, −0.05] = [0.0095, −0.0095];
  // p = p·(1 − 0.05) − m = [1.895·0.95 − 0.0095, 1.905·0.95 + 0.0095] = [1.79075, 1.8192500]
  opt->step(std::span<const OptimParam>(&v, 1), 0.1);
  EXPECT_NEAR(p.value[0], 1.79075, kF32Tol);
  EXPECT_NEAR(p.value[1], 1.81925, kF32Tol);
}

TEST(Adafactor, ScaleParameterCarriesTheLrToTheNextParameter) {
  // fairseq writes each parameter's lr into param_group["lr"]: with --scale-parameter the second
  // parameter starts from the first one's lr. lr 0.01, p1 = [3, 4] (RMS √12.5), p2 = [2, 2]
  // (RMS 2), g = [1, 1] (u = [1, 1], RMS 1: no clip):
  //   lr1 = 0.01·√12.5 = 0.0353553…;  lr2 = lr1·2 = 0.0707106…
  // The next update starts again from the schedule's lr (0.01·RMS of the updated p1).
  auto opt = make_optimizer(adafactor({.scale_parameter = true}));
  std::vector<Param> ps{{"p1", {3, 4}, {1, 1}, {}}, {"p2", {2, 2}, {1, 1}, {}}};
  std::vector<OptimParam> views{ps[0].view(), ps[1].view()};
  opt->step(views, 0.01);
  const double lr1 = 0.01 * std::sqrt(12.5), lr2 = lr1 * 2;
  EXPECT_NEAR(ps[0].value[0], 3 - lr1, kF32Tol);
  EXPECT_NEAR(ps[0].value[1], 4 - lr1, kF32Tol);
  EXPECT_NEAR(ps[1].value[0], 2 - lr2, kF32Tol);
  // Step 2: RMS1' = √(((3−lr1)² + (4−lr1)²)/2); lr1' = 0.01·RMS1'; lr2' = lr1'·RMS2', RMS2' = 2 − lr2.
  opt->step(views, 0.01);
  const double rms1 = std::sqrt(((3 - lr1) * (3 - lr1) + (4 - lr1) * (4 - lr1)) / 2), lr1b = 0.01 * rms1;
  const double lr2b = lr1b * (2 - lr2);
  EXPECT_NEAR(ps[0].value[0], 3 - lr1 - lr1b, kF32Tol);
  EXPECT_NEAR(ps[1].value[1], 2 - lr2 - lr2b, kF32Tol);
}

TEST(Adafactor, RelativeStepAndWarmupInitIgnoreTheScheduleLr) {
  // t = 1, 2: relative step min(1e-2, 1/√t) = 1e-2; warmup_init: min(1e-6·t, 1/√t) = 1e-6·t.
  // A zero parameter with --scale-parameter uses eps2 = 1e-3 (RMS 0 < eps2). g = [1] (u = 1).
  auto rel = make_optimizer(adafactor({.relative_step = true}));
  auto warm = make_optimizer(adafactor({.scale_parameter = true, .relative_step = true, .warmup_init = true}));
  Param a{"w", {1}, {1}, {}}, b{"w", {0}, {1}, {}};
  OptimParam va = a.view(), vb = b.view();
  rel->step(std::span<const OptimParam>(&va, 1), 123.0);  // the lr argument is ignored
  warm->step(std::span<const OptimParam>(&vb, 1), 123.0);
  EXPECT_NEAR(a.value[0], 1 - 1e-2, 1e-7);
  EXPECT_NEAR(b.value[0], -1e-3 * 1e-6, 1e-13);  // scale eps2 (RMS 0), rel 1e-6
  warm->step(std::span<const OptimParam>(&vb, 1), 123.0);
  // t = 2: RMS = 1e-9 < eps2: scale 1e-3, rel 2e-6
  EXPECT_NEAR(b.value[0], -1e-9 - 1e-3 * 2e-6, 1e-13);
}

TEST(Adafactor, RejectsOutOfRangeSettingsNamingTheFlag) {
  auto msg = [](OptimizerConfig c) { return error_of([&] { make_optimizer(adafactor(c)); }); };
  EXPECT_NE(msg({.clip_threshold = 0}).find("--clip-threshold 0: must be finite and > 0"), std::string::npos);
  EXPECT_NE(msg({.decay_rate = 0}).find("--decay-rate 0: must be < 0"), std::string::npos);
  EXPECT_NE(msg({.adafactor_eps1 = -1}).find("--adafactor-eps eps1 -1"), std::string::npos);
  EXPECT_NE(msg({.adafactor_eps2 = std::nan("")}).find("--adafactor-eps eps2"), std::string::npos);
  EXPECT_NE(msg({.adafactor_beta1 = 1.0}).find("--beta1 1: must be in [0, 1)"), std::string::npos);
  EXPECT_NE(msg({.warmup_init = true}).find("--warmup-init requires --relative-step"), std::string::npos);
  EXPECT_EQ(parse_adafactor_eps("(1e-30, 1e-3)"), std::make_pair(1e-30, 1e-3));
  EXPECT_NE(error_of([] { parse_adafactor_eps("(1e-30)"); }).find("needs two numbers"), std::string::npos);
  EXPECT_NE(error_of([] { parse_adafactor_eps("(1e-30, -2)"); }).find("each eps must be >= 0"), std::string::npos);
}

TEST(Adafactor, ShapeChangeAtLoadIsAClearError) {
  auto a = make_optimizer(adafactor());
  Param p{"w", std::vector<float>(6, 1.0f), std::vector<float>(6, 0.5f), {2, 3}};
  OptimParam v = p.view();
  a->step(std::span<const OptimParam>(&v, 1), 0.1);
  OptimizerState st = a->state_dict();
  st.source = "ckpt.pt";
  Param q = p;
  q.shape = {3, 2};  // same numel, other factoring: rows 3, columns 2
  OptimParam vq = q.view();
  auto b = make_optimizer(adafactor());
  const std::string e = error_of([&] { b->load_state_dict(st, std::span<const OptimParam>(&vq, 1)); });
  EXPECT_NE(e.find("'w.exp_avg_sq_row' is F32 [2] but parameter 'w' needs F32 with 3 elements"), std::string::npos) << e;
}

}  // namespace
}  // namespace stretch::optim
