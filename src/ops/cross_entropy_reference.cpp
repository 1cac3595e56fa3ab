// ops/cross_entropy_reference.cpp — naive oracle: per row, max and Σexp in double (two passes),
// lse = max + log Σ exp(x − max), loss = lse − x[target]; backward p = exp(x − lse) in double.
#include <cmath>
#include <limits>

#include "ops/cross_entropy.h"

namespace stretch::ops::ref {
namespace {

template <class T>
CrossEntropyResult forward(T* losses, T* lse, const T* logits, const int32_t* targets, const CrossEntropyDims& d) {
  CrossEntropyResult r;
  double total = 0.0;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* x = logits + n * d.v;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < d.v; ++v) m = std::fmax(m, static_cast<double>(x[v]));
    double s = 0.0;
    for (int64_t v = 0; v < d.v; ++v) s += std::exp(x[v] - m);
    const double row_lse = m + std::log(s);
    if (lse) lse[n] = static_cast<T>(row_lse);
    double loss = 0.0;
    if (targets[n] != d.ignore_index) {
      loss = row_lse - static_cast<double>(x[targets[n]]);
      total += loss;
      r.count++;
    }
    if (losses) losses[n] = static_cast<T>(loss);
  }
  r.loss = d.reduction == Reduction::Mean ? (r.count ? total / static_cast<double>(r.count) : 0.0) : total;
  return r;
}

template <class T>
void backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, T dloss, int64_t count,
              const CrossEntropyDims& d) {
  const double scale = d.reduction == Reduction::Mean ? (count ? static_cast<double>(dloss) / count : 0.0)
                                                      : static_cast<double>(dloss);
  for (int64_t n = 0; n < d.n; ++n) {
    if (targets[n] == d.ignore_index) continue;
    for (int64_t v = 0; v < d.v; ++v) {
      const double p = std::exp(static_cast<double>(logits[n * d.v + v]) - static_cast<double>(lse[n]));
      const double g = scale * (p - (v == targets[n] ? 1.0 : 0.0));
      dlogits[n * d.v + v] = static_cast<T>(dlogits[n * d.v + v] + g);
    }
  }
}

}  // namespace

CrossEntropyResult cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                                         const CrossEntropyDims& d) {
  return forward(losses, lse, logits, targets, d);
}
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                            float dloss, int64_t count, const CrossEntropyDims& d) {
  backward(dlogits, logits, lse, targets, dloss, count, d);
}
CrossEntropyResult cross_entropy_forward(double* losses, double* lse, const double* logits, const int32_t* targets,
                                         const CrossEntropyDims& d) {
  return forward(losses, lse, logits, targets, d);
}
void cross_entropy_backward(double* dlogits, const double* logits, const double* lse, const int32_t* targets,
                            double dloss, int64_t count, const CrossEntropyDims& d) {
  backward(dlogits, logits, lse, targets, dloss, count, d);
}

}  // namespace stretch::ops::ref
