// tests/optim/test_grad_factor.cpp — Optimizer::step(params, lr, grad_factor) against the two-pass
// form it replaces in train/update.cpp: multiply_grads(params, grad_factor), then step(params, lr).
// The contract is bitwise: NAG and Adam/AdamW multiply inside their update loop (the same float
// product g · float(f)), the other kinds fall back to multiply_grads, so parameters and optimizer
// state must match to the bit, on the vectorised/threaded path (n ≥ 2^15) and the serial one, for
// factors ≠ 1 and = 1, with weight decay and a changing lr. scale_and_clip_factor is checked
// against scale_and_clip_grads (its multiplier is what the latter applies).
#include <gtest/gtest.h>

#include "testing.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "optim/grad_clip.h"
#include "optim/optimizer.h"

namespace stretch::optim {
namespace {

struct Param {
  std::string name;
  std::vector<float> value, grad;
  OptimParam view() { return {name, value.data(), grad.data(), static_cast<int64_t>(value.size())}; }
};

std::vector<Param> make_params(int t) {
  std::vector<Param> ps{{"big", std::vector<float>(100003), {}}, {"small", std::vector<float>(37), {}}};
  for (Param& p : ps) {
    const int64_t n = static_cast<int64_t>(p.value.size());
    p.grad.resize(p.value.size());
    for (int64_t i = 0; i < n; ++i) {
      p.value[i] = static_cast<float>(std::sin(0.001 * i + 0.5));
      p.grad[i] = static_cast<float>(3.7 * std::cos(0.0031 * i + t));
    }
  }
  return ps;
}

std::vector<OptimParam> views(std::vector<Param>& ps) {
  std::vector<OptimParam> v;
  for (Param& p : ps) v.push_back(p.view());
  return v;
}

TEST(OptimizerGradFactor, SameBitsAsMultiplyGradsThenStep) {
  for (auto kind : {OptimizerKind::Nag, OptimizerKind::Adam, OptimizerKind::AdamW, OptimizerKind::Sgd,
                    OptimizerKind::Adagrad}) {
    for (double wd : {0.0, 0.01}) {
      OptimizerConfig cfg{.kind = kind, .momentum = kind == OptimizerKind::Sgd ? std::optional<double>(0.9) : std::nullopt,
                          .weight_decay = wd};
      auto two_pass = make_optimizer(cfg), fused = make_optimizer(cfg);
      std::vector<Param> a = make_params(0), b = make_params(0);
      const double factors[4] = {1.0 / 1024, 1.0, 0.37 / 977.0, 1.0 / 3.0};
      for (int t = 0; t < 4; ++t) {
        std::vector<Param> ga = make_params(t);
        for (size_t k = 0; k < a.size(); ++k) a[k].grad = ga[k].grad, b[k].grad = ga[k].grad;
        const double lr = 0.01 * (t + 1);
        auto va = views(a), vb = views(b);
        multiply_grads(va, factors[t]);
        two_pass->step(va, lr);
        fused->step(vb, lr, factors[t]);
        for (size_t k = 0; k < a.size(); ++k)
          ASSERT_EQ(0, std::memcmp(a[k].value.data(), b[k].value.data(), a[k].value.size() * sizeof(float)))
              << optimizer_kind_name(kind) << " wd " << wd << " step " << t << " " << a[k].name;
      }
      const OptimizerState sa = two_pass->state_dict(), sb = fused->state_dict();
      ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
      for (size_t s = 0; s < sa.tensors.size(); ++s) {
        const Tensor &x = sa.tensors[s].second, &y = sb.tensors[s].second;
        ASSERT_EQ(x.numel(), y.numel());
        EXPECT_EQ(0, std::memcmp(x.f32(), y.f32(), static_cast<size_t>(x.numel()) * sizeof(float)))
            << optimizer_kind_name(kind) << " " << sa.tensors[s].first;
      }
    }
  }
}

TEST(OptimizerGradFactor, NonFiniteFactorIsRefused) {
  auto opt = make_optimizer({.kind = OptimizerKind::Nag});
  std::vector<Param> ps = make_params(0);
  auto v = views(ps);
  EXPECT_THROW(opt->step(v, 0.1, NAN), Error);
  EXPECT_THROW(opt->step(v, 0.1, INFINITY), Error);
}

TEST(ScaleAndClipFactor, IsTheMultiplierScaleAndClipGradsApplies) {
  for (double max_norm : {0.0, 0.1, 1e9}) {
    std::vector<Param> a = make_params(1), b = make_params(1);
    auto va = views(a), vb = views(b);
    const GradScale s = scale_and_clip_factor(vb, 1.0 / 1024, max_norm);
    // b's gradients are untouched.
    const std::vector<Param> orig = make_params(1);
    for (size_t k = 0; k < b.size(); ++k)
      EXPECT_EQ(0, std::memcmp(b[k].grad.data(), orig[k].grad.data(), b[k].grad.size() * sizeof(float)));
    const double norm = scale_and_clip_grads(va, 1.0 / 1024, max_norm);
    EXPECT_EQ(norm, s.norm);
    multiply_grads(vb, s.factor);
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_EQ(0, std::memcmp(a[k].grad.data(), b[k].grad.data(), a[k].grad.size() * sizeof(float)))
          << "max_norm " << max_norm;
    // The factor by hand: 1/1024 · min(1, max_norm / (norm + 1e-6)) when clipping applies.
    const double want = max_norm > 0 ? std::min(1.0, max_norm / (s.norm + 1e-6)) / 1024 : 1.0 / 1024;
    EXPECT_DOUBLE_EQ(s.factor, want);
  }
  std::vector<Param> bad = make_params(0);
  bad[1].grad[3] = NAN;
  auto vbad = views(bad);
  const GradScale s = scale_and_clip_factor(vbad, 0.5, 0.1);
  EXPECT_FALSE(std::isfinite(s.norm));
  EXPECT_EQ(s.factor, 1.0);
}

}  // namespace
}  // namespace stretch::optim
