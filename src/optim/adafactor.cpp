// optim/adafactor.cpp — fairseq 0.12.2's Adafactor (`--optimizer adafactor`,
// fairseq/optim/adafactor.py: FairseqAdafactor over its Adafactor class), fp32 path.
// Per parameter p of fairseq's shape (OptimParam::shape), t = its step count, g = its grad:
//   RMS   = ‖p‖₂ / sqrt(N)                                     (before the update)
//   lr    = param_scale · rel_step, with
//             rel_step    = min(1e-6·t if warmup_init else 1e-2, 1/sqrt(t))   (relative_step)
//                         = group_lr                                          (otherwise)
//             param_scale = max(eps2, RMS) (scale_parameter) else 1
//           and group_lr ← lr afterwards: fairseq writes it back into param_group["lr"], so with
//           scale_parameter and no relative_step the next parameter of the SAME update starts
//           from this one's lr (the scales multiply along fairseq's parameter order). Each
//           update starts from the schedule's lr (every fairseq schedule but
//           reduce_lr_on_plateau calls set_lr after each update; that one is refused with
//           scale_parameter in train/optim_settings.cpp). fairseq's RMS is a float32 tensor, so
//           once it enters the product lr is a float32 number; stretch follows that rounding.
//   β2t   = 1 − t^decay_rate;  u = g² + eps1
//   rank ≥ 2, [..., R, C] (factored over the last two dims, e.g. a Linear's [out, in]):
//           row = β2t·row + (1−β2t)·mean_C(u)   [..., R]
//           col = β2t·col + (1−β2t)·mean_R(u)   [..., C]
//           u   = rsqrt(row / mean_R(row)) · rsqrt(col) · g
//   rank 1: v = β2t·v + (1−β2t)·u;  u = rsqrt(v)·g
//   u /= max(1, RMS(u) / clip_threshold);  u *= lr
//   beta1:  m = β1·m + (1−β1)·u;  u = m
//   wd ≠ 0: p += (−wd·lr)·p;  then p −= u
// Element math is float in torch's order; each `x.mul_(a).add_(y, alpha=b)` is torch's
// fma(y, b, x·a) (checked against torch 1.13 on AVX-512 and AVX2), rsqrt is 1/sqrt in two
// roundings. Means and norms are summed in double and rounded once (torch sums in float with
// its own order): the one source of difference from fairseq, ≤ ~1e-7 relative per step
// (tests/fairseq/check_adafactor.py). Compiled with -ffp-contract=off (CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/grad_clip.h"
#include "optim/optimizer_impl.h"

namespace stretch::optim::detail {
namespace {

// A Python number as fairseq's lr is: a double, or (once a float32 tensor entered the product)
// a float32 0-dim tensor.
struct TorchNumber {
  double value;
  bool is_f32;
};

TorchNumber torch_mul(TorchNumber a, TorchNumber b) {
  if (!a.is_f32 && !b.is_f32) return {a.value * b.value, false};
  return {static_cast<float>(a.value) * static_cast<float>(b.value), true};  // float32 tensor · number
}

// The factoring of a parameter: [batch, rows, cols] for rank ≥ 2, else not factored.
struct Factors {
  bool factored = false;
  int64_t batch = 0, rows = 0, cols = 0;
};

Factors factors_of(const OptimParam& p) {
  Factors f;
  if (p.shape.size() < 2) return f;
  int64_t n = 1;
  for (int64_t d : p.shape) n *= d;
  STRETCH_CHECK(n == p.numel, "adafactor: parameter '" << p.name << "' has " << p.numel
                                                       << " elements but its shape has " << n);
  f.factored = true;
  f.rows = p.shape[p.shape.size() - 2];
  f.cols = p.shape.back();
  f.batch = f.rows * f.cols == 0 ? 0 : n / (f.rows * f.cols);
  return f;
}

// ‖x‖₂ / sqrt(n) as torch's `x.norm(2) / (x.numel() ** 0.5)`: a float32 norm over a float32 divisor.
float rms_of(const float* x /*[N]*/, int64_t n) {
  const float norm = static_cast<float>(std::sqrt(sum_of_squares(x, n)));
  return norm / static_cast<float>(std::sqrt(static_cast<double>(n)));
}

class Adafactor final : public Optimizer {
 public:
  explicit Adafactor(const OptimizerConfig& c) : Optimizer(c) {}

 protected:
  std::vector<std::string> slot_names() const override { return {}; }  // slot_layout says

  std::vector<SlotSpec> slot_layout(const OptimParam& p) const override {
    std::vector<SlotSpec> out;
    if (config_.adafactor_beta1) out.push_back({"exp_avg", p.numel});
    const Factors f = factors_of(p);
    if (f.factored) {
      out.push_back({"exp_avg_sq_row", f.batch * f.rows});  // shape[:-1]
      out.push_back({"exp_avg_sq_col", f.batch * f.cols});  // shape[:-2] + shape[-1:]
    } else {
      out.push_back({"exp_avg_sq", p.numel});
    }
    return out;
  }

  void begin_step(double lr) override { group_lr_ = {lr, false}; }

  void update(const OptimParam& p, ParamState& st, double /*lr: begin_step's*/) override {
    const OptimizerConfig& c = config_;
    const int64_t n = p.numel;
    const double t = static_cast<double>(st.step);
    float* __restrict v = p.value;
    const float* __restrict g = p.grad;

    // _get_lr (fairseq order: RMS of the parameter before this update).
    const float rms = rms_of(v, n);
    TorchNumber rel = group_lr_;
    if (c.relative_step) {
      const double min_step = c.warmup_init ? 1e-6 * t : 1e-2;
      const double inv = 1.0 / std::sqrt(t);
      rel = {inv < min_step ? inv : min_step, false};  // Python min(min_step, inv)
    }
    TorchNumber scale{1.0, false};
    if (c.scale_parameter)  // Python max(eps2, RMS): the tensor when RMS > eps2 (compared in float32)
      scale = rms > static_cast<float>(c.adafactor_eps2) ? TorchNumber{rms, true} : TorchNumber{c.adafactor_eps2, false};
    const TorchNumber lr = torch_mul(scale, rel);
    group_lr_ = lr;

    const double beta2t = 1.0 - std::pow(t, c.decay_rate);
    const float fb = static_cast<float>(beta2t), fa = static_cast<float>(1.0 - beta2t);
    const float eps1 = static_cast<float>(c.adafactor_eps1);
    int slot = 0;
    float* __restrict m = c.adafactor_beta1 ? st.slot[slot++].f32() : nullptr;
    Tensor u_buf = Tensor::empty({n});
    float* __restrict u = u_buf.f32();  // [N] the update

    const Factors f = factors_of(p);
    if (f.factored) {
      float* __restrict row = st.slot[slot].f32();      // [B·R]
      float* __restrict col = st.slot[slot + 1].f32();  // [B·C]
      const int64_t R = f.rows, C = f.cols;
      std::vector<double> colsum(static_cast<size_t>(C));
      for (int64_t b = 0; b < f.batch; ++b) {
        const float* gb = g + b * R * C;
        std::fill(colsum.begin(), colsum.end(), 0.0);
        double* cs = colsum.data();
        for (int64_t r = 0; r < R; ++r) {
          const float* gr = gb + r * C;
          double rs = 0.0;
          for (int64_t j = 0; j < C; ++j) {
            const float sq = gr[j] * gr[j] + eps1;
            rs += sq;
            cs[j] += sq;
          }
          float& x = row[b * R + r];
          x = std::fma(static_cast<float>(rs / static_cast<double>(C)), fa, x * fb);
        }
        for (int64_t j = 0; j < C; ++j) {
          float& x = col[b * C + j];
          x = std::fma(static_cast<float>(cs[j] / static_cast<double>(R)), fa, x * fb);
        }
        // r_factor = rsqrt(row / mean_R(row)) [R], c_factor = rsqrt(col) [C]
        double row_total = 0.0;
        for (int64_t r = 0; r < R; ++r) row_total += row[b * R + r];
        const float row_mean = static_cast<float>(row_total / static_cast<double>(R));
        std::vector<float> rf(static_cast<size_t>(R)), cf(static_cast<size_t>(C));
        for (int64_t r = 0; r < R; ++r) rf[r] = 1.0f / std::sqrt(row[b * R + r] / row_mean);
        for (int64_t j = 0; j < C; ++j) cf[j] = 1.0f / std::sqrt(col[b * C + j]);
        float* ub = u + b * R * C;
        for (int64_t r = 0; r < R; ++r) {
          const float rr = rf[r];
          const float* crow = cf.data();
          const float* gr = gb + r * C;
          float* ur = ub + r * C;
#pragma omp simd
          for (int64_t j = 0; j < C; ++j) ur[j] = (rr * crow[j]) * gr[j];
        }
      }
    } else {
      float* __restrict sq = st.slot[slot].f32();  // [N]
      for_each_element(n, [=](int64_t i) {
        const float s = std::fma(g[i] * g[i] + eps1, fa, sq[i] * fb);
        sq[i] = s;
        u[i] = (1.0f / std::sqrt(s)) * g[i];
      });
    }

    // u /= clamp(RMS(u) / clip, min=1);  u *= lr
    const float denom = std::max(rms_of(u, n) / static_cast<float>(c.clip_threshold), 1.0f);
    const float flr = static_cast<float>(lr.value);
    for_each_element(n, [=](int64_t i) { u[i] = (u[i] / denom) * flr; });

    if (m) {
      const float b1 = static_cast<float>(*c.adafactor_beta1), omb1 = static_cast<float>(1.0 - *c.adafactor_beta1);
      for_each_element(n, [=](int64_t i) {
        m[i] = std::fma(u[i], omb1, m[i] * b1);
        u[i] = m[i];
      });
    }
    if (c.weight_decay != 0.0) {
      // alpha = −wd·lr: a double rounded to float, or a float32 tensor product.
      const float alpha = static_cast<float>(torch_mul({-c.weight_decay, false}, lr).value);
      for_each_element(n, [=](int64_t i) { v[i] = std::fma(v[i], alpha, v[i]); });
    }
    for_each_element(n, [=](int64_t i) { v[i] = v[i] - u[i]; });
  }

  void save_scalars(nlohmann::json& out) const override {
    auto& cfg = out["config"];
    cfg["eps"] = {config_.adafactor_eps1, config_.adafactor_eps2};
    cfg["clip_threshold"] = config_.clip_threshold;
    cfg["decay_rate"] = config_.decay_rate;
    cfg["beta1"] = config_.adafactor_beta1 ? nlohmann::json(*config_.adafactor_beta1) : nlohmann::json(nullptr);
    cfg["scale_parameter"] = config_.scale_parameter;
    cfg["relative_step"] = config_.relative_step;
    cfg["warmup_init"] = config_.warmup_init;
  }

 private:
  TorchNumber group_lr_{0.0, false};  // fairseq's param_group["lr"] during one step()
};

}  // namespace

std::unique_ptr<Optimizer> make_adafactor(const OptimizerConfig& c) { return std::make_unique<Adafactor>(c); }

}  // namespace stretch::optim::detail
