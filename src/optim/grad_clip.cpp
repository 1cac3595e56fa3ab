// optim/grad_clip.cpp — global gradient norm, clipping and scaling (a non-finite norm flags
// NaN/inf gradients).
// Work is cut into (parameter, block of kBlock elements) items so that many small tensors
// and a few huge ones both spread over the threads; per-item double sums are added in item
// order, which makes the norm independent of the thread count.
#include "optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "optim/optimizer_impl.h"

namespace stretch::optim {
namespace {

constexpr int64_t kBlock = 1 << 16;

struct Item {
  const float* x;
  int64_t n;
};

std::vector<Item> grad_items(std::span<const OptimParam> params) {
  std::vector<Item> items;
  for (const OptimParam& p : params) {
    STRETCH_CHECK(p.numel >= 0 && (p.numel == 0 || p.grad), "parameter '" << p.name << "' has no grad");
    for (int64_t b = 0; b < p.numel; b += kBlock) items.push_back({p.grad + b, std::min(kBlock, p.numel - b)});
  }
  return items;
}

double block_sum_of_squares(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

double items_sum_of_squares(const std::vector<Item>& items) {
  const int64_t k = static_cast<int64_t>(items.size());
  std::vector<double> partial(items.size());
#pragma omp parallel for schedule(static) if (k > 1)
  for (int64_t i = 0; i < k; ++i) partial[i] = block_sum_of_squares(items[i].x, items[i].n);
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace

double sum_of_squares(const float* x, int64_t n) {
  std::vector<Item> items;
  for (int64_t b = 0; b < n; b += kBlock) items.push_back({x + b, std::min(kBlock, n - b)});
  return items_sum_of_squares(items);
}

double clip_coefficient(double total_norm, double max_norm) {
  if (!(max_norm > 0)) return 1.0;
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

double grad_norm(std::span<const OptimParam> params) {
  return std::sqrt(items_sum_of_squares(grad_items(params)));
}

double clip_grad_norm(std::span<const OptimParam> params, double max_norm) {
  STRETCH_CHECK(!(max_norm < 0) && !std::isnan(max_norm), "--clip-norm " << max_norm << " (must be >= 0)");
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0) multiply_grads(params, coef);
  return norm;
}

GradScale scale_and_clip_factor(std::span<const OptimParam> params, double factor, double max_norm) {
  STRETCH_CHECK(!(max_norm < 0) && !std::isnan(max_norm), "--clip-norm " << max_norm << " (must be >= 0)");
  GradScale out;
  out.norm = factor * grad_norm(params);
  if (std::isfinite(out.norm)) out.factor = factor * clip_coefficient(out.norm, max_norm);
  return out;
}

double scale_and_clip_grads(std::span<const OptimParam> params, double factor, double max_norm) {
  const GradScale s = scale_and_clip_factor(params, factor, max_norm);
  if (s.factor != 1.0) multiply_grads(params, s.factor);
  return s.norm;
}

void multiply_grads(std::span<const OptimParam> params, double factor) {
  const float f = static_cast<float>(factor);
  for (const OptimParam& p : params) {
    STRETCH_CHECK(p.numel >= 0 && (p.numel == 0 || p.grad), "parameter '" << p.name << "' has no grad");
    float* __restrict g = p.grad;
    detail::for_each_element(p.numel, [=](int64_t i) { g[i] = g[i] * f; });
  }
}

}  // namespace stretch::optim
