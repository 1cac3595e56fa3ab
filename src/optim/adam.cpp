// optim/adam.cpp — Adam in the two forms users know (t = this parameter's step count):
//  adam   fairseq's Adam (fairseq/optim/adam.py, REFERENCE §3.5): decoupled weight decay and
//         eps added to sqrt(v) BEFORE the bias correction is folded into the step size:
//           m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g·g;  denom = sqrt(v) + eps
//           s = lr·sqrt(1−β2^t)/(1−β1^t);  p += (−wd·lr)·p (wd ≠ 0);  p += (−s)·(m/denom)
//  adamw  torch.optim.AdamW (= torch.optim.Adam when wd = 0): eps added AFTER the correction:
//           p *= 1 − lr·wd (wd ≠ 0);  m, v as above;  denom = sqrt(v)/sqrt(1−β2^t) + eps
//           p += (−lr/(1−β1^t))·(m/denom)
// The two differ only in where eps enters: by a relative eps·(1/sqrt(1−β2^t) − 1)/sqrt(v̂)
// in the step, negligible unless sqrt(v) is near eps.
#include <cmath>

#include "optim/optimizer_impl.h"

namespace stretch::optim::detail {
namespace {

class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerConfig& c) : Optimizer(c), eps_(c.eps.value_or(1e-8)) {}

 protected:
  std::vector<std::string> slot_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool scales_grads_in_update() const override { return true; }

  void update(const OptimParam& p, ParamState& st, double lr) override {
    const double b1 = config_.beta1, b2 = config_.beta2, wd = config_.weight_decay;
    const double t = static_cast<double>(st.step);
    const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
    const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    const float one_minus_b1 = static_cast<float>(1.0 - b1), one_minus_b2 = static_cast<float>(1.0 - b2);
    const float feps = static_cast<float>(eps_);
    float* __restrict v = p.value;
    const float* __restrict g = p.grad;
    float* __restrict m = st.slot[0].f32();
    float* __restrict s2 = st.slot[1].f32();
    const bool decay = wd != 0.0;
    const float gf = grad_factor_;
    if (config_.kind == OptimizerKind::Adam) {
      const float neg_step = static_cast<float>(-(lr * std::sqrt(bc2) / bc1));
      const float neg_decay = static_cast<float>(-wd * lr);
      for_each_element(p.numel, [=](int64_t i) {
        const float gi = g[i] * gf;  // multiply_grads' rounding (gf = 1: exact)
        const float mi = m[i] * fb1 + one_minus_b1 * gi;
        const float si = s2[i] * fb2 + one_minus_b2 * gi * gi;
        m[i] = mi;
        s2[i] = si;
        const float denom = std::sqrt(si) + feps;
        float x = v[i];
        if (decay) x = x + neg_decay * x;
        v[i] = x + neg_step * (mi / denom);
      });
    } else {
      const float decay_scale = static_cast<float>(1.0 - lr * wd);
      const float neg_step = static_cast<float>(-(lr / bc1));
      const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
      for_each_element(p.numel, [=](int64_t i) {
        const float gi = g[i] * gf;  // multiply_grads' rounding (gf = 1: exact)
        float x = v[i];
        if (decay) x = x * decay_scale;
        const float mi = m[i] * fb1 + one_minus_b1 * gi;
        const float si = s2[i] * fb2 + one_minus_b2 * gi * gi;
        m[i] = mi;
        s2[i] = si;
        const float denom = std::sqrt(si) / bc2_sqrt + feps;
        v[i] = x + neg_step * (mi / denom);
      });
    }
  }

  void save_scalars(nlohmann::json& out) const override {
    out["config"]["betas"] = {config_.beta1, config_.beta2};
    out["config"]["eps"] = eps_;
  }

 private:
  double eps_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& c) { return std::make_unique<Adam>(c); }

}  // namespace stretch::optim::detail
