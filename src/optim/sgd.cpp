// optim/sgd.cpp — torch.optim.SGD as fairseq's `--optimizer sgd` uses it (dampening 0, no
// nesterov). Per element: d = g + wd·p (wd ≠ 0 only); with momentum μ ≠ 0: buf = d on a
// parameter's first step, else buf = μ·buf + d, and d = buf; then p −= lr·d.
// With μ = 0 there is no buffer (and no state tensor).
#include "optim/optimizer_impl.h"

namespace stretch::optim::detail {
namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& c) : Optimizer(c), momentum_(c.momentum.value_or(0.0)) {}

 protected:
  std::vector<std::string> slot_names() const override {
    if (momentum_ == 0.0) return {};
    return {"momentum_buffer"};
  }

  void update(const OptimParam& p, ParamState& st, double lr) override {
    const bool decay = config_.weight_decay != 0.0;
    const float wd = static_cast<float>(config_.weight_decay);
    const float mu = static_cast<float>(momentum_);
    const float neg_lr = static_cast<float>(-lr);
    float* __restrict v = p.value;
    const float* __restrict g = p.grad;
    if (momentum_ == 0.0) {
      for_each_element(p.numel, [=](int64_t i) {
        float d = decay ? g[i] + wd * v[i] : g[i];
        v[i] = v[i] + neg_lr * d;
      });
      return;
    }
    float* __restrict buf = st.slot[0].f32();
    const bool first = st.step == 1;
    for_each_element(p.numel, [=](int64_t i) {
      float d = decay ? g[i] + wd * v[i] : g[i];
      float b = first ? d : buf[i] * mu + d;
      buf[i] = b;
      v[i] = v[i] + neg_lr * b;
    });
  }

  void save_scalars(nlohmann::json& out) const override { out["config"]["momentum"] = momentum_; }

 private:
  double momentum_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& c) { return std::make_unique<Sgd>(c); }

}  // namespace stretch::optim::detail
