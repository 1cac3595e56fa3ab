// tests/optim/test_optimizers.cpp — each optimizer against updates computed by hand (the
// numbers and their arithmetic are written here), plus state save/load giving bit-identical
// continued steps, and the config/flag validation.
//
// Tolerances: stretch updates in fp32 (like torch); hand values are exact decimals or double
// formulas. One fp32 rounding of a value near 1 is ≤ 6e-8, and a few steps of a few
// operations each stay below 1e-6 absolute for the O(1) values used here (kF32Tol).
#include <gtest/gtest.h>

#include "testing.h"
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/safetensors.h"

namespace stretch::optim {
namespace {

constexpr double kF32Tol = 1e-6;

// A named parameter owning its value and grad.
struct Param {
  std::string name;
  std::vector<float> value, grad;
  std::vector<int64_t> shape = {};  // empty: [N] (adafactor factors rank >= 2)
  OptimParam view() { return {name, value.data(), grad.data(), static_cast<int64_t>(value.size()), shape}; }
};

void step1(Optimizer& opt, Param& p, std::vector<float> grad, double lr) {
  p.grad = std::move(grad);
  OptimParam v = p.view();
  opt.step(std::span<const OptimParam>(&v, 1), lr);
}

TEST(Nag, OneAndTwoStepsByHandWithLrCorrection) {
  auto opt = make_optimizer({.kind = OptimizerKind::Nag});  // momentum 0.99 by default
  Param p{"w", {1.0f, -2.0f}, {}};
  // Step 1, lr 0.1, buf = 0:  p -= (1+0.99)·0.1·g = 0.199·g;  buf = −0.1·g
  //   p = [1 − 0.199·0.5, −2 − 0.199·0.25] = [0.9005, −2.04975];  buf = [−0.05, −0.025]
  step1(*opt, p, {0.5f, 0.25f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.9005, kF32Tol);
  EXPECT_NEAR(p.value[1], -2.04975, kF32Tol);
  // Step 2, lr 0.2, so c = 0.2/0.1 = 2, g = [−0.25, 1]:
  //   p += 0.99²·2·buf = 1.9602·buf = [−0.09801, −0.049005]  -> [0.80249, −2.098755]
  //   p −= 1.99·0.2·g = 0.398·g = [−0.0995, 0.398]             -> [0.90199, −2.496755]
  //   buf = 0.99·2·buf − 0.2·g = [−0.099 + 0.05, −0.0495 − 0.2] = [−0.049, −0.2495]
  step1(*opt, p, {-0.25f, 1.0f}, 0.2);
  EXPECT_NEAR(p.value[0], 0.90199, kF32Tol);
  EXPECT_NEAR(p.value[1], -2.496755, kF32Tol);
  auto sd = opt->state_dict();
  ASSERT_EQ(sd.tensors.size(), 1u);
  EXPECT_EQ(sd.tensors[0].first, "w.momentum_buffer");
  EXPECT_NEAR(sd.tensors[0].second.f32()[0], -0.049, kF32Tol);
  EXPECT_NEAR(sd.tensors[0].second.f32()[1], -0.2495, kF32Tol);
  EXPECT_DOUBLE_EQ(sd.scalars["lr_old"].get<double>(), 0.2);
  // Step 3, lr 0.05 (c = 0.25), g = [0, 0]: p += 0.9801·0.25·buf; buf = 0.99·0.25·buf
  //   p = [0.90199 − 0.012006225, −2.496755 − 0.0611337375] = [0.889983775, −2.5578887375]
  step1(*opt, p, {0.0f, 0.0f}, 0.05);
  EXPECT_NEAR(p.value[0], 0.889983775, kF32Tol);
  EXPECT_NEAR(p.value[1], -2.5578887375, kF32Tol);
}

TEST(Nag, WeightDecayComesFirst) {
  auto opt = make_optimizer({.kind = OptimizerKind::Nag, .momentum = 0.9, .weight_decay = 0.1});
  Param p{"w", {2.0f}, {}};
  // p *= 1 − 0.5·0.1 = 0.95 -> 1.9;  p −= 1.9·0.5·1.0 = 0.95 -> 0.95
  step1(*opt, p, {1.0f}, 0.5);
  EXPECT_NEAR(p.value[0], 0.95, kF32Tol);
}

// Fairseq Adam and torch AdamW written out in double, the way the papers state them.
struct AdamRef {
  double b1, b2, eps, wd;
  bool fairseq;  // eps outside the bias correction
  double m = 0, v = 0;
  int t = 0;
  double step(double p, double g, double lr) {
    ++t;
    if (!fairseq) p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    if (fairseq) {
      p -= wd * lr * p;
      return p - lr * std::sqrt(bc2) / bc1 * m / (std::sqrt(v) + eps);
    }
    return p - lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
  }
};

TEST(Adam, FirstStepMovesByLrTimesSign) {
  // Step 1: m̂ = g, v̂ = g², so the step is lr·g/|g| up to eps: p = 1 − 0.01 = 0.99.
  for (auto kind : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    auto opt = make_optimizer({.kind = kind});
    Param p{"w", {1.0f, 1.0f}, {}};
    step1(*opt, p, {0.5f, -3.0f}, 0.01);
    EXPECT_NEAR(p.value[0], 0.99, 1e-7);
    EXPECT_NEAR(p.value[1], 1.01, 1e-7);
  }
}

TEST(Adam, SecondStepByHand) {
  // g1 = 0.5, g2 = −0.25, lr 0.01, default betas:
  //   m2 = 0.9·0.05 − 0.1·0.25 = 0.02;  v2 = 0.999·0.00025 + 0.001·0.0625 = 0.00031225
  //   m̂ = 0.02/0.19 = 0.10526316;  v̂ = 0.00031225/0.001999 = 0.15620310;  sqrt = 0.39522538
  //   p2 = 0.99 − 0.01·0.10526316/0.39522538 = 0.99 − 0.00266337 = 0.98733663
  auto opt = make_optimizer({.kind = OptimizerKind::Adam});
  Param p{"w", {1.0f}, {}};
  step1(*opt, p, {0.5f}, 0.01);
  step1(*opt, p, {-0.25f}, 0.01);
  EXPECT_NEAR(p.value[0], 0.98733663, kF32Tol);
  EXPECT_EQ(opt->step_count("w"), 2);
}

TEST(Adam, FairseqAndAdamWMatchTheirFormulasWithDecayAndChangingLr) {
  const double grads[4] = {0.3, -1.2, 0.05, 0.7};
  const double lrs[4] = {0.1, 0.05, 0.2, 0.01};
  for (auto kind : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    OptimizerConfig cfg{.kind = kind, .weight_decay = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-3};
    auto opt = make_optimizer(cfg);
    AdamRef ref{0.8, 0.95, 1e-3, 0.05, kind == OptimizerKind::Adam};
    Param p{"w", {0.7f}, {}};
    double pr = 0.7;
    for (int t = 0; t < 4; ++t) {
      step1(*opt, p, {static_cast<float>(grads[t])}, lrs[t]);
      pr = ref.step(pr, static_cast<float>(grads[t]), lrs[t]);
      EXPECT_NEAR(p.value[0], pr, kF32Tol) << optimizer_kind_name(kind) << " step " << t + 1;
    }
  }
  // eps placement matters when sqrt(v) is near eps: the two kinds must differ there.
  Param a{"w", {1.0f}, {}}, b{"w", {1.0f}, {}};
  auto oa = make_optimizer({.kind = OptimizerKind::Adam, .eps = 1e-2});
  auto ob = make_optimizer({.kind = OptimizerKind::AdamW, .eps = 1e-2});
  step1(*oa, a, {0.01f}, 0.1);
  step1(*ob, b, {0.01f}, 0.1);
  // adam: s = 0.1·sqrt(0.001)/0.1 = 0.0316228; denom = sqrt(1e-7) + 0.01 = 0.0103162;
  //   p = 1 − 0.0316228·0.001/0.0103162 = 0.99693465
  // adamw: denom = 0.01 + 0.01 = 0.02; p = 1 − 0.1·0.01/0.02 = 0.95
  EXPECT_NEAR(a.value[0], 0.99693465, kF32Tol);
  EXPECT_NEAR(b.value[0], 0.95, kF32Tol);
}

TEST(Sgd, MomentumAndWeightDecayByHand) {
  auto opt = make_optimizer({.kind = OptimizerKind::Sgd, .momentum = 0.9, .weight_decay = 0.01});
  Param p{"w", {1.0f}, {}};
  // Step 1: d = 0.5 + 0.01·1 = 0.51; buf = d = 0.51; p = 1 − 0.1·0.51 = 0.949
  step1(*opt, p, {0.5f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.949, kF32Tol);
  // Step 2: d = −0.25 + 0.00949 = −0.24051; buf = 0.459 − 0.24051 = 0.21849;
  //   p = 0.949 − 0.1·0.21849 = 0.927151
  step1(*opt, p, {-0.25f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.927151, kF32Tol);
  // Plain SGD (momentum 0, the default) keeps no state.
  auto plain = make_optimizer({.kind = OptimizerKind::Sgd});
  Param q{"w", {1.0f}, {}};
  step1(*plain, q, {2.0f}, 0.25);
  EXPECT_NEAR(q.value[0], 0.5, kF32Tol);
  EXPECT_TRUE(plain->state_dict().tensors.empty());
}

TEST(Adagrad, ByHandWithLrDecay) {
  auto opt = make_optimizer({.kind = OptimizerKind::Adagrad, .lr_decay = 0.5});
  Param p{"w", {1.0f}, {}};
  // Step 1: clr = 0.1; sum = 0.25; p = 1 − 0.1·0.5/0.5 = 0.9
  step1(*opt, p, {0.5f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.9, kF32Tol);
  // Step 2: clr = 0.1/(1 + 1·0.5) = 0.0666667; sum = 0.3125; sqrt = 0.55901699;
  //   p = 0.9 + 0.0666667·0.25/0.55901699 = 0.9 + 0.02981424 = 0.92981424
  step1(*opt, p, {-0.25f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.92981424, kF32Tol);
}

TEST(Adagrad, InitialAccumulatorAndWeightDecay) {
  auto opt = make_optimizer({.kind = OptimizerKind::Adagrad, .weight_decay = 0.5, .initial_accumulator_value = 0.75});
  Param p{"w", {2.0f}, {}};
  // d = 0.5 + 0.5·2 = 1.5; sum = 0.75 + 2.25 = 3; p = 2 − 0.1·1.5/sqrt(3) = 2 − 0.08660254 = 1.91339746
  step1(*opt, p, {0.5f}, 0.1);
  EXPECT_NEAR(p.value[0], 1.91339746, kF32Tol);
}

TEST(AdagradWithGradClip, ClipsEachTensorByItsOwnNorm) {
  auto opt = make_optimizer({.kind = OptimizerKind::AdagradWithGradClip, .adagrad_clip = 1.0});
  Param big{"big", {1.0f, 1.0f}, {3.0f, 4.0f}};      // ‖g‖ = 5 > 1
  Param small{"small", {1.0f, 1.0f}, {0.3f, 0.4f}};  // ‖g‖ = 0.5 ≤ 1
  std::vector<OptimParam> views{big.view(), small.view()};
  opt->step(views, 0.1);
  // big: clr = 0.1·1/(5 + 1e-10) = 0.02; sum = g², so g/sqrt(sum) = 1: p = 1 − 0.02 = 0.98
  EXPECT_NEAR(big.value[0], 0.98, kF32Tol);
  EXPECT_NEAR(big.value[1], 0.98, kF32Tol);
  // small: clr = 0.1 unclipped: p = 1 − 0.1 = 0.9
  EXPECT_NEAR(small.value[0], 0.9, kF32Tol);
  EXPECT_NEAR(small.value[1], 0.9, kF32Tol);
  // The accumulator holds the UNclipped g²: [9, 16]
  auto sd = opt->state_dict();
  ASSERT_EQ(sd.tensors[0].first, "big.sum");
  EXPECT_FLOAT_EQ(sd.tensors[0].second.f32()[0], 9.0f);
  EXPECT_FLOAT_EQ(sd.tensors[0].second.f32()[1], 16.0f);
  // Step 2 on big with g = [3, 4] again: clr = 0.02; sum = [18, 32];
  //   p = 0.98 − 0.02·[3/sqrt(18), 4/sqrt(32)] = 0.98 − 0.02·0.70710678 = 0.96585786
  std::vector<OptimParam> one{big.view()};
  opt->step(one, 0.1);
  EXPECT_NEAR(big.value[0], 0.96585786, kF32Tol);
  EXPECT_NEAR(big.value[1], 0.96585786, kF32Tol);
}

// Three steps of fairseq's AdagradWithGradClip (examples/adaptive_span/adagrad_with_grad_clip.py,
// REFERENCE §5.5) on one 2-element tensor, lr 0.1, --adagrad-clip 1: the clip acts at steps 1
// and 3 and not at step 2, and the accumulator keeps the unclipped squares throughout.
// (1e-10 in the clip factor changes clr by 2e-11 relative: below kF32Tol, so left out below.)
TEST(AdagradWithGradClip, ThreeStepsByHand) {
  auto opt = make_optimizer({.kind = OptimizerKind::AdagradWithGradClip, .adagrad_clip = 1.0});
  Param p{"w", {1.0f, 2.0f}, {}};
  // Step 1: g = [3, 4], ‖g‖ = 5 > 1: clr = 0.1·1/5 = 0.02; sum = [9, 16];
  //   g/sqrt(sum) = [1, 1];  p = [1 − 0.02, 2 − 0.02] = [0.98, 1.98]
  step1(*opt, p, {3.0f, 4.0f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.98, kF32Tol);
  EXPECT_NEAR(p.value[1], 1.98, kF32Tol);
  // Step 2: g = [0.6, 0], ‖g‖ = 0.6 ≤ 1: clr = 0.1 (no clip); sum = [9.36, 16];
  //   sqrt(9.36) = 3.0594117081556710;  p0 = 0.98 − 0.1·0.6/3.059411708 = 0.98 − 0.0196116135
  //   = 0.9603883865;  p1 unchanged (g = 0) = 1.98
  step1(*opt, p, {0.6f, 0.0f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.9603883865, kF32Tol);
  EXPECT_NEAR(p.value[1], 1.98, kF32Tol);
  // Step 3: g = [−0.8, 1.5], ‖g‖ = sqrt(0.64 + 2.25) = 1.7 > 1: clr = 0.1/1.7 = 0.0588235294;
  //   sum = [10, 18.25];  sqrt: [3.1622776602, 4.2720018727]
  //   p0 = 0.9603883865 + 0.0588235294·0.8/3.1622776602 = 0.9603883865 + 0.0148813066 = 0.9752696931
  //   p1 = 1.98 − 0.0588235294·1.5/4.2720018727 = 1.98 − 0.0206543201 = 1.9593456799
  step1(*opt, p, {-0.8f, 1.5f}, 0.1);
  EXPECT_NEAR(p.value[0], 0.9752696931, kF32Tol);
  EXPECT_NEAR(p.value[1], 1.9593456799, kF32Tol);
  auto sd = opt->state_dict();
  ASSERT_EQ(sd.tensors.size(), 1u);
  EXPECT_EQ(sd.tensors[0].first, "w.sum");
  EXPECT_NEAR(sd.tensors[0].second.f32()[0], 10.0, kF32Tol);   // 9 + 0.36 + 0.64: unclipped squares
  EXPECT_NEAR(sd.tensors[0].second.f32()[1], 18.25, kF32Tol);  // 16 + 0 + 2.25
  EXPECT_EQ(opt->step_count("w"), 3);
}

// fairseq clips on the norm of d = g + wd·p (weight decay is added before _clip_grad), not of g.
TEST(AdagradWithGradClip, ClipNormIncludesWeightDecay) {
  auto opt = make_optimizer({.kind = OptimizerKind::AdagradWithGradClip, .weight_decay = 0.5, .adagrad_clip = 1.0});
  Param p{"w", {2.0f}, {}};
  // d = 0.5 + 0.5·2 = 1.5 > 1: clr = 0.1/1.5 = 0.0666667; sum = 2.25; d/sqrt(sum) = 1;
  //   p = 2 − 0.0666667 = 1.9333333  (clipping on ‖g‖ = 0.5 would give 2 − 0.1 = 1.9)
  step1(*opt, p, {0.5f}, 0.1);
  EXPECT_NEAR(p.value[0], 1.9333333333, kF32Tol);
}

// The OpenMP path (large tensors) gives the same per-element result as the formula.
TEST(Nag, LargeTensorMatchesPerElementFormula) {
  const int64_t n = 100003;
  Param p{"big", std::vector<float>(n), std::vector<float>(n)};
  for (int64_t i = 0; i < n; ++i) p.value[i] = std::sin(0.001 * i), p.grad[i] = std::cos(0.003 * i);
  std::vector<float> p0 = p.value;
  auto opt = make_optimizer({.kind = OptimizerKind::Nag});
  OptimParam v = p.view();
  opt->step(std::span<const OptimParam>(&v, 1), 0.3);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(p.value[i] - (p0[i] - 1.99 * 0.3 * p.grad[i])));
  EXPECT_LT(worst, kF32Tol);
}

// The contract: results do not depend on the thread count (each element is updated by the
// same arithmetic whether it falls in a vector body or a remainder loop).
TEST(Optimizer, SameBitsForAnyThreadCount) {
  const int64_t n = 100003;
  for (auto kind : {OptimizerKind::Nag, OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW,
                    OptimizerKind::Adagrad, OptimizerKind::AdagradWithGradClip, OptimizerKind::Adafactor}) {
    std::vector<float> result[2];
    const int threads[2] = {1, 3};
    const int saved = omp_get_max_threads();
    for (int r = 0; r < 2; ++r) {
      omp_set_num_threads(threads[r]);
      Param p{"w", std::vector<float>(n), std::vector<float>(n)};
      for (int64_t i = 0; i < n; ++i) p.value[i] = static_cast<float>(std::sin(0.001 * i));
      OptimizerConfig cfg{.kind = kind, .momentum = kind == OptimizerKind::Sgd ? std::optional<double>(0.9) : std::nullopt,
                          .weight_decay = 0.01, .adagrad_clip = kind == OptimizerKind::AdagradWithGradClip ? 10.0 : 0.0};
      auto opt = make_optimizer(cfg);
      for (int t = 0; t < 3; ++t) {
        for (int64_t i = 0; i < n; ++i) p.grad[i] = static_cast<float>(std::cos(0.003 * i + t));
        OptimParam v = p.view();
        opt->step(std::span<const OptimParam>(&v, 1), 0.01 * (t + 1));
      }
      result[r] = p.value;
    }
    omp_set_num_threads(saved);
    EXPECT_EQ(0, std::memcmp(result[0].data(), result[1].data(), n * sizeof(float))) << optimizer_kind_name(kind);
  }
}

// ---------------------------------------------------------------------------------------
// State save/load

std::vector<Param> make_params() {
  std::vector<Param> ps{{"decoder.embed_tokens.weight", std::vector<float>(37), {}},
                        {"decoder.layers.0.fc1.bias", std::vector<float>(5), {}},
                        {"decoder.layers.0.fc1.weight", std::vector<float>(12), {}, {3, 4}},
                        {"decoder.empty", {}, {}}};
  for (auto& p : ps) {
    p.grad.resize(p.value.size());
    for (size_t i = 0; i < p.value.size(); ++i) p.value[i] = 0.1f * static_cast<float>(i) - 0.7f;
  }
  return ps;
}

void fill_grads(std::vector<Param>& ps, int t) {
  for (auto& p : ps)
    for (size_t i = 0; i < p.grad.size(); ++i) p.grad[i] = static_cast<float>(std::sin(1.3 * t + 0.7 * i) * (1 + i % 3));
}

std::vector<OptimParam> views(std::vector<Param>& ps) {
  std::vector<OptimParam> v;
  for (auto& p : ps) v.push_back(p.view());
  return v;
}

OptimizerConfig config_for(OptimizerKind k) {
  OptimizerConfig c{.kind = k, .weight_decay = 0.01};
  if (k == OptimizerKind::Sgd) c.momentum = 0.9;
  if (k == OptimizerKind::AdagradWithGradClip) c.adagrad_clip = 0.5;
  if (k == OptimizerKind::Adafactor) c.adafactor_beta1 = 0.9, c.scale_parameter = true;
  return c;
}

class StateRoundTrip : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(StateRoundTrip, ThroughSafetensorsGivesBitIdenticalSteps) {
  const OptimizerKind kind = GetParam();
  auto a = make_optimizer(config_for(kind));
  auto pa = make_params();
  const double lrs[] = {0.1, 0.2, 0.05, 0.07, 0.3};
  for (int t = 0; t < 3; ++t) {
    fill_grads(pa, t);
    a->step(views(pa), lrs[t]);
  }
  // Save state + params to a file, load them into a fresh optimizer and fresh params.
  const std::string path = ::testing::TempDir() + "/optim_state_" + optimizer_kind_name(kind) + ".safetensors";
  {
    OptimizerState st = a->state_dict();
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (auto& [n, t] : st.tensors) tensors.emplace_back("optimizer." + n, t);
    for (auto& p : pa) {
      Tensor t = Tensor::empty({static_cast<int64_t>(p.value.size())});
      if (!p.value.empty()) std::memcpy(t.f32(), p.value.data(), p.value.size() * 4);
      tensors.emplace_back("model." + p.name, t);
    }
    save_safetensors(path, tensors, {{"optimizer", st.scalars.dump()}});
  }
  SafetensorsFile file = load_safetensors(path);
  auto pb = make_params();
  OptimizerState st{.tensors = {}, .scalars = nlohmann::json::parse(file.metadata.at("optimizer")), .source = path};
  for (auto& [n, t] : file.tensors) {
    if (n.rfind("optimizer.", 0) == 0) st.tensors.emplace_back(n.substr(10), t);
    for (auto& p : pb)
      if (n == "model." + p.name && !p.value.empty()) std::memcpy(p.value.data(), t.f32(), p.value.size() * 4);
  }
  auto b = make_optimizer(config_for(kind));
  b->load_state_dict(st, views(pb));
  for (int t = 3; t < 5; ++t) {
    fill_grads(pa, t);
    fill_grads(pb, t);
    a->step(views(pa), lrs[t]);
    b->step(views(pb), lrs[t]);
  }
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].value.size(), pb[i].value.size());
    if (!pa[i].value.empty()) {  // bitwise, so −0 vs +0 or a NaN payload would show
      EXPECT_EQ(0, std::memcmp(pa[i].value.data(), pb[i].value.data(), pa[i].value.size() * 4)) << pa[i].name;
    }
  }
  EXPECT_EQ(b->step_count("decoder.layers.0.fc1.bias"), 5);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, StateRoundTrip,
                         ::testing::Values(OptimizerKind::Nag, OptimizerKind::Sgd, OptimizerKind::Adam,
                                           OptimizerKind::AdamW, OptimizerKind::Adagrad,
                                           OptimizerKind::AdagradWithGradClip, OptimizerKind::Adafactor),
                         [](const auto& info) { return std::string(optimizer_kind_name(info.param)); });

using stretch::testing::error_of;

TEST(OptimizerState, LoadRejectsMismatchesWithClearErrors) {
  auto a = make_optimizer({.kind = OptimizerKind::Adam});
  auto ps = make_params();
  fill_grads(ps, 0);
  a->step(views(ps), 0.1);
  OptimizerState good = a->state_dict();
  good.source = "ckpt.safetensors";

  auto nag = make_optimizer({.kind = OptimizerKind::Nag});
  EXPECT_NE(error_of([&] { nag->load_state_dict(good, views(ps)); }).find("is for 'adam' but the optimizer is 'nag'"),
            std::string::npos);

  auto b = make_optimizer({.kind = OptimizerKind::Adam});
  OptimizerState missing = good;
  missing.tensors.erase(missing.tensors.begin());
  std::string e = error_of([&] { b->load_state_dict(missing, views(ps)); });
  EXPECT_NE(e.find("ckpt.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("is missing"), std::string::npos) << e;

  OptimizerState wrong_size = good;
  wrong_size.tensors[0].second = Tensor::zeros({3});
  e = error_of([&] { b->load_state_dict(wrong_size, views(ps)); });
  EXPECT_NE(e.find("needs F32 with"), std::string::npos) << e;

  auto fewer = views(ps);
  fewer.pop_back();
  e = error_of([&] { b->load_state_dict(good, fewer); });
  EXPECT_NE(e.find("that the model does not have"), std::string::npos) << e;

  OptimizerState extra = good;
  extra.tensors.emplace_back("decoder.ghost.exp_avg", Tensor::zeros({1}));
  e = error_of([&] { b->load_state_dict(extra, views(ps)); });
  EXPECT_NE(e.find("unexpected tensor 'decoder.ghost.exp_avg'"), std::string::npos) << e;

  // A failed load leaves the optimizer as it was; a good one works; a fresh state resets.
  EXPECT_EQ(b->step_count("decoder.embed_tokens.weight"), 0);
  b->load_state_dict(good, views(ps));
  EXPECT_EQ(b->step_count("decoder.embed_tokens.weight"), 1);
  auto fresh = make_optimizer({.kind = OptimizerKind::Adam});
  b->load_state_dict(fresh->state_dict(), views(ps));
  EXPECT_EQ(b->step_count("decoder.embed_tokens.weight"), 0);
}

TEST(Optimizer, RejectsBadCallsAndConfigs) {
  auto opt = make_optimizer({.kind = OptimizerKind::Sgd});
  Param p{"w", {1.0f}, {1.0f}};
  std::vector<OptimParam> twice{p.view(), p.view()};
  EXPECT_NE(error_of([&] { opt->step(twice, 0.1); }).find("passed twice"), std::string::npos);
  std::vector<OptimParam> once{p.view()};
  EXPECT_THROW(opt->step(once, std::nan("")), Error);
  EXPECT_THROW(opt->step(once, -1.0), Error);
  EXPECT_THROW(make_optimizer({.kind = OptimizerKind::Nag, .momentum = 1.5}), Error);
  EXPECT_THROW(make_optimizer({.kind = OptimizerKind::Adam, .beta2 = 1.0}), Error);
  EXPECT_THROW(make_optimizer({.kind = OptimizerKind::Adagrad, .adagrad_clip = 0.1}), Error);
  EXPECT_THROW(make_optimizer({.kind = OptimizerKind::Sgd, .weight_decay = -1}), Error);
}

TEST(OptimizerFlags, ParseKindsAndBetas) {
  for (auto k : {OptimizerKind::Nag, OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW,
                 OptimizerKind::Adagrad, OptimizerKind::AdagradWithGradClip, OptimizerKind::Adafactor})
    EXPECT_EQ(parse_optimizer_kind(optimizer_kind_name(k)), k);
  EXPECT_EQ(std::string(optimizer_kind_name(OptimizerKind::AdagradWithGradClip)), "adagrad_with_grad_clip");
  EXPECT_EQ(std::string(optimizer_kind_name(OptimizerKind::Adafactor)), "adafactor");
  std::string e = error_of([] { parse_optimizer_kind("lamb"); });
  EXPECT_NE(e.find("--optimizer lamb"), std::string::npos) << e;

  EXPECT_EQ(parse_adam_betas("(0.9, 0.98)"), std::make_pair(0.9, 0.98));
  EXPECT_EQ(parse_adam_betas("[0.9,0.999]"), std::make_pair(0.9, 0.999));
  EXPECT_EQ(parse_adam_betas(" 0.5 , 0.25 "), std::make_pair(0.5, 0.25));
  EXPECT_THROW(parse_adam_betas("(0.9)"), Error);
  EXPECT_THROW(parse_adam_betas("(0.9, 1.0)"), Error);
  e = error_of([] { parse_adam_betas("(0.9, x)"); });
  EXPECT_NE(e.find("--adam-betas"), std::string::npos) << e;
  EXPECT_NE(e.find("'x'"), std::string::npos) << e;
  EXPECT_EQ(parse_float_list("--lr", "0.25"), std::vector<double>({0.25}));
  EXPECT_EQ(parse_float_list("--lr", "1e-3,5e-4"), std::vector<double>({1e-3, 5e-4}));
  EXPECT_THROW(parse_float_list("--lr", ""), Error);
  EXPECT_THROW(parse_float_list("--lr", "0.1,"), Error);
  EXPECT_THROW(parse_float_list("--lr", "inf"), Error);
}

}  // namespace
}  // namespace stretch::optim
