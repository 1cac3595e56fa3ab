// ops/elementwise_cpu.cpp — add/axpy/scale (OpenMP + SIMD above a size threshold) and the head
// transposes (one contiguous D-row copy per (b, h, t), OpenMP over rows).
#include <cstring>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/elementwise.h"

namespace stretch::ops {
namespace {

void check_heads(const HeadDims& d) {
  STRETCH_CHECK(d.b >= 0 && d.t >= 0 && d.h >= 0 && d.d >= 0,
                "head dims b=" << d.b << " t=" << d.t << " h=" << d.h << " d=" << d.d);
}

}  // namespace

void add_forward(float* out, const float* a, const float* b, int64_t n) {
  // No __restrict: out may alias a or b (elementwise, so aliasing is safe).
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void axpy(float* out, const float* x, float alpha, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] += alpha * x[i];
}

void scale_forward(float* out, const float* x, float alpha, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}

void split_heads(float* out, const float* inp, const HeadDims& d) {
  check_heads(d);
  const int64_t rows = d.b * d.h * d.t;  // out rows in [B, H, T] order
  const size_t row_bytes = static_cast<size_t>(d.d) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * d.d > cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % d.t, h = (r / d.t) % d.h, b = r / (d.t * d.h);
    std::memcpy(out + r * d.d, inp + ((b * d.t + t) * d.h + h) * d.d, row_bytes);
  }
}

void merge_heads(float* out, const float* inp, const HeadDims& d) {
  check_heads(d);
  const int64_t rows = d.b * d.t * d.h;  // out rows in [B, T, H] order
  const size_t row_bytes = static_cast<size_t>(d.d) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * d.d > cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r % d.h, t = (r / d.h) % d.t, b = r / (d.h * d.t);
    std::memcpy(out + r * d.d, inp + ((b * d.h + h) * d.t + t) * d.d, row_bytes);
  }
}

}  // namespace stretch::ops
