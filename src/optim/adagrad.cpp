// optim/adagrad.cpp — torch.optim.Adagrad (`--optimizer adagrad`) and fairseq's
// AdagradWithGradClip (`--optimizer adagrad_with_grad_clip`, examples/adaptive_span;
// REFERENCE §5.5). t = this parameter's step count. Per parameter tensor:
//   d = g + wd·p (wd ≠ 0);  clr = lr / (1 + (t−1)·lr_decay)
//   with clip (adagrad_with_grad_clip, clip > 0): n = ‖d‖₂ over THIS tensor;
//       if n > clip: clr ← clr·clip/(n + 1e-10)      (scales the step only)
//   sum += d·d  (the unclipped d);  p += (−clr)·d/(sqrt(sum) + eps)   (eps 1e-10)
// ‖d‖₂ is accumulated in double in fixed blocks (torch: fp32), so it is deterministic.
#include <cmath>

#include "optim/grad_clip.h"
#include "optim/optimizer_impl.h"

namespace stretch::optim::detail {
namespace {

class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerConfig& c) : Optimizer(c), eps_(c.eps.value_or(1e-10)) {}

 protected:
  std::vector<std::string> slot_names() const override { return {"sum"}; }
  float slot_init(int) const override { return static_cast<float>(config_.initial_accumulator_value); }

  void update(const OptimParam& p, ParamState& st, double lr) override {
    const bool decay = config_.weight_decay != 0.0;
    const float wd = static_cast<float>(config_.weight_decay);
    float* __restrict v = p.value;
    const float* __restrict g = p.grad;
    float* __restrict sum = st.slot[0].f32();
    double clr = lr / (1.0 + static_cast<double>(st.step - 1) * config_.lr_decay);
    const double clip = config_.adagrad_clip;
    if (config_.kind == OptimizerKind::AdagradWithGradClip && clip > 0) {
      double norm;
      if (decay) {
        Tensor d = Tensor::empty({p.numel});
        float* dp = d.f32();
        for_each_element(p.numel, [=](int64_t i) { dp[i] = g[i] + wd * v[i]; });
        norm = std::sqrt(sum_of_squares(dp, p.numel));
      } else {
        norm = std::sqrt(sum_of_squares(g, p.numel));
      }
      if (norm > clip) clr *= clip / (norm + 1e-10);
    }
    const float neg_clr = static_cast<float>(-clr);
    const float feps = static_cast<float>(eps_);
    for_each_element(p.numel, [=](int64_t i) {
      const float d = decay ? g[i] + wd * v[i] : g[i];
      const float s = sum[i] + d * d;
      sum[i] = s;
      v[i] = v[i] + neg_clr * (d / (std::sqrt(s) + feps));
    });
  }

  void save_scalars(nlohmann::json& out) const override {
    out["config"]["eps"] = eps_;
    out["config"]["lr_decay"] = config_.lr_decay;
    out["config"]["adagrad_clip"] = config_.adagrad_clip;
  }

 private:
  double eps_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adagrad(const OptimizerConfig& c) { return std::make_unique<Adagrad>(c); }

}  // namespace stretch::optim::detail
