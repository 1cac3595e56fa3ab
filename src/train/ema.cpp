// train/ema.cpp — fairseq's trainer-level EMA (contract in ema.h).
#include "train/ema.h"

#include <cmath>

#include "core/error.h"

namespace stretch::train {

void ema_update(float* avg, const float* w, int64_t n, double decay) {
  // torch: avg.mul_(decay) rounds avg·float(decay); avg.add_(w, alpha=1 − decay) is
  // fmadd(w, float(alpha), avg) in its vector kernel. 1 − decay is taken in double, as Python does.
  // Elementwise, so the threads (large tensors only: OpenMP's start-up costs more below) change no bit.
  const float d = static_cast<float>(decay), alpha = static_cast<float>(1.0 - decay);
#pragma omp parallel for simd schedule(static) if (n >= (1 << 15))
  for (int64_t i = 0; i < n; ++i) avg[i] = std::fma(w[i], alpha, avg[i] * d);
}

void Ema::seed_from(const std::vector<optim::OptimParam>& params) {
  avg_.clear();
  for (const auto& p : params) avg_.emplace_back(p.value, p.value + p.numel);
}

void Ema::step(const std::vector<optim::OptimParam>& params, int64_t num_updates, const EmaSettings& s,
               int64_t& counter) {
  if (!built()) seed_from(params);  // fairseq builds the EMA model on its first use
  last_decay_ = num_updates < s.start_update ? 0.0 : s.decay;
  if (s.update_freq > 1) {
    if (++counter < s.update_freq) return;
    counter = 0;
  }
  STRETCH_CHECK(avg_.size() == params.size(), "Ema::step: " << avg_.size() << " averages for " << params.size()
                                                               << " parameters");
  for (size_t k = 0; k < params.size(); ++k) ema_update(avg_[k].data(), params[k].value, params[k].numel, last_decay_);
}

NamedTensors Ema::save(const std::vector<optim::OptimParam>& params) const {
  NamedTensors out;
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor t = Tensor::empty(params[k].shape.empty() ? Shape{params[k].numel} : Shape(params[k].shape));
    const float* src = built() ? avg_[k].data() : params[k].value;
    std::copy(src, src + params[k].numel, t.f32());
    out.emplace_back("ema." + params[k].name, std::move(t));
  }
  return out;
}

bool Ema::load(const NamedTensors& file_tensors, const std::vector<optim::OptimParam>& params,
               const std::string& source) {
  std::vector<std::vector<float>> got(params.size());
  size_t found = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string key = "ema." + params[k].name;
    for (const auto& [name, t] : file_tensors) {
      if (name != key) continue;
      if (t.dtype() != DType::F32 || t.numel() != params[k].numel)
        fail_input(source, "tensor '" + key + "' has " + std::to_string(t.numel()) + " values (or is not float32); the "
                               "parameter has " + std::to_string(params[k].numel),
                   "the file is damaged or was written for another model; restore an earlier checkpoint");
      got[k].assign(t.f32(), t.f32() + t.numel());
      ++found;
    }
  }
  if (found == 0) return false;
  if (found != params.size())
    fail_input(source, "holds the EMA of " + std::to_string(found) + " of the model's " + std::to_string(params.size()) +
                           " parameters",
               "the file is damaged; restore an earlier checkpoint");
  avg_ = std::move(got);
  return true;
}

}  // namespace stretch::train
