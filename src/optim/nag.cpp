// optim/nag.cpp — fairseq's NAG (REFERENCE §3.3): the "reformulated" Nesterov update that
// works on the parameters directly, with the lr correction c = lr / lr_old.
// Per element, in this order (the buffer update uses the OLD buffer):
//   p *= 1 − lr·wd  (only when wd ≠ 0);  p += μ²·c·buf;  p −= (1+μ)·lr·g;  buf = μ·c·buf − lr·g
// lr_old is the lr of the previous step() (one per optimizer: fairseq has one param group).
#include <cmath>

#include "optim/optimizer_impl.h"

namespace stretch::optim::detail {
namespace {

class Nag final : public Optimizer {
 public:
  explicit Nag(const OptimizerConfig& c) : Optimizer(c), momentum_(c.momentum.value_or(0.99)) {}

 protected:
  std::vector<std::string> slot_names() const override { return {"momentum_buffer"}; }

  void begin_step(double lr) override {
    // First step: the buffer is zero, so c is irrelevant; fairseq initialises lr_old to the
    // constructor lr. A zero lr_old means buf = −lr_old·v = 0, so c·buf is taken as 0.
    if (!lr_old_) lr_correct_ = 1.0;
    else lr_correct_ = *lr_old_ == 0.0 ? 0.0 : lr / *lr_old_;
  }
  void end_step(double lr) override { lr_old_ = lr; }
  bool scales_grads_in_update() const override { return true; }

  void update(const OptimParam& p, ParamState& st, double lr) override {
    const double mu = momentum_, wd = config_.weight_decay, c = lr_correct_;
    const bool decay = wd != 0.0;
    const float decay_scale = static_cast<float>(1.0 - lr * wd);
    const float buf_into_p = static_cast<float>(mu * mu * c);
    const float grad_into_p = static_cast<float>(-(1.0 + mu) * lr);
    const float buf_scale = static_cast<float>(mu * c);
    const float grad_into_buf = static_cast<float>(-lr);
    float* __restrict v = p.value;
    const float* __restrict g = p.grad;
    float* __restrict buf = st.slot[0].f32();
    const float gf = grad_factor_;
    for_each_element(p.numel, [=](int64_t i) {
      const float gi = g[i] * gf;  // multiply_grads' rounding, without its pass (gf = 1: exact)
      float x = v[i];
      if (decay) x = x * decay_scale;
      x = x + buf_into_p * buf[i];
      x = x + grad_into_p * gi;
      v[i] = x;
      buf[i] = buf[i] * buf_scale + grad_into_buf * gi;
    });
  }

  void save_scalars(nlohmann::json& out) const override {
    out["lr_old"] = lr_old_ ? nlohmann::json(*lr_old_) : nlohmann::json(nullptr);
    out["config"]["momentum"] = momentum_;
  }
  void load_scalars(const nlohmann::json& in, const std::string& source) override {
    if (!in.contains("lr_old") || !(in["lr_old"].is_number() || in["lr_old"].is_null()))
      fail_input(source, "NAG state has no numeric \"lr_old\"",
                 "start the optimizer afresh with --reset-optimizer");
    if (in["lr_old"].is_null()) lr_old_.reset();
    else lr_old_ = in["lr_old"].get<double>();
  }

 private:
  double momentum_;
  std::optional<double> lr_old_;
  double lr_correct_ = 1.0;
};

}  // namespace

std::unique_ptr<Optimizer> make_nag(const OptimizerConfig& c) { return std::make_unique<Nag>(c); }

}  // namespace stretch::optim::detail
