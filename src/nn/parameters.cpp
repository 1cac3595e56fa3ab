#include "nn/parameters.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace stretch::nn {

Var ParameterList::add(const std::string& name, Shape shape) {
  STRETCH_CHECK(!contains(name), "parameter " << name << " registered twice");
  Var v(Tensor::zeros(std::move(shape)), true);
  items_.emplace_back(name, v);
  return v;
}

Var ParameterList::add(const std::string& name, Var v) {
  STRETCH_CHECK(!contains(name), "parameter " << name << " registered twice");
  items_.emplace_back(name, v);
  return v;
}

const Var& ParameterList::get(const std::string& name) const {
  for (const auto& [n, v] : items_)
    if (n == name) return v;
  fail_internal(__FILE__, __LINE__, "no parameter named " + name);
}

bool ParameterList::contains(const std::string& name) const {
  for (const auto& [n, v] : items_)
    if (n == name) return true;
  return false;
}

int64_t ParameterList::numel() const {
  int64_t n = 0;
  for (const auto& [name, v] : items_) n += v.numel();
  return n;
}

// All gradients zeroed in one parallel region, in chunks of 256 KiB: on one thread the small
// model's 33 MB took 2.8-3.0 ms, 1.1% of a 2-thread step at T 128 on Zen 3 with the other thread
// idle meanwhile; on both, 1.8-2.0 ms (docs/BENCHMARKS.md, "Zen 3: where a 2-thread step waits").
void ParameterList::zero_grad() const {
  constexpr size_t kChunk = size_t{256} << 10;  // bytes
  std::vector<std::pair<std::byte*, size_t>> chunks;
  for (const auto& [name, v] : items_) {
    if (!v.has_grad()) continue;
    Tensor& g = v.grad();
    auto* p = static_cast<std::byte*>(g.bytes());
    for (size_t at = 0; at < g.nbytes(); at += kChunk) chunks.emplace_back(p + at, std::min(kChunk, g.nbytes() - at));
  }
  const auto n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t i = 0; i < n; ++i) std::memset(chunks[i].first, 0, chunks[i].second);
}

void init_xavier_uniform(Var& w, float gain, Rng& rng) {
  const int64_t fan_out = w.shape()[0], fan_in = w.numel() / fan_out;
  const float bound = gain * std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  float* p = w.data();
  for (int64_t i = 0; i < w.numel(); ++i) p[i] = rng.uniform(-bound, bound);
}

void init_uniform_fan_in(Var& v, int64_t fan_in, Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  float* p = v.data();
  for (int64_t i = 0; i < v.numel(); ++i) p[i] = rng.uniform(-bound, bound);
}

void init_normal(Var& v, float mean, float std, Rng& rng) {
  float* p = v.data();
  for (int64_t i = 0; i < v.numel(); ++i) p[i] = rng.normal(mean, std);
}

void init_constant(Var& v, float value) { v.value().fill_(value); }

}  // namespace stretch::nn
