// ops/rope_cpu.cpp — RoPE fast path: a cos/sin table [T, D/2] computed once per call (double
// angles, rounded to float; from the tensor pool), then OpenMP over (b, h, t) rows with vectorised
// rotations over the D/2 pairs.
#include <cmath>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/rope.h"

namespace stretch::ops {
namespace {

template <bool kInverse>
void rotate(float* out, const float* inp, const RopeDims& d) {
  STRETCH_CHECK(d.b >= 0 && d.h >= 0 && d.t >= 0 && d.d >= 0 && d.pos0 >= 0,
                "rope dims b=" << d.b << " h=" << d.h << " t=" << d.t << " d=" << d.d << " pos0=" << d.pos0);
  STRETCH_CHECK(d.d % 2 == 0, "rope needs an even head dim, got D=" << d.d);
  const int64_t half = d.d / 2, T = d.t;
  if (half == 0 || T == 0 || d.b * d.h == 0) return;
  cpu::Scratch table(2 * T * half);  // [T, D/2] cos then [T, D/2] sin
  float* cos_t = table.data();
  float* sin_t = cos_t + T * half;
#pragma omp parallel for schedule(static) if (T * half > 4096)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(static_cast<double>(d.base), -2.0 * static_cast<double>(i) / d.d);
      const double theta = static_cast<double>(d.pos0 + t) * inv_freq;
      cos_t[t * half + i] = static_cast<float>(std::cos(theta));
      sin_t[t * half + i] = static_cast<float>(std::sin(theta));
    }
  const int64_t rows = d.b * d.h * T;
#pragma omp parallel for schedule(static) if (rows * d.d > cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    const float* __restrict c = cos_t + t * half;
    const float* __restrict s = sin_t + t * half;
    const float* x = inp + r * d.d;  // may alias y in forward: each pair is read before it is written
    float* y = out + r * d.d;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = x[i], x1 = x[i + half];
      if constexpr (kInverse) {
        y[i] += x0 * c[i] + x1 * s[i];
        y[i + half] += x1 * c[i] - x0 * s[i];
      } else {
        y[i] = x0 * c[i] - x1 * s[i];
        y[i + half] = x1 * c[i] + x0 * s[i];
      }
    }
  }
}

}  // namespace

void rope_forward(float* out, const float* inp, const RopeDims& d) { rotate<false>(out, inp, d); }
void rope_backward(float* dinp, const float* dout, const RopeDims& d) { rotate<true>(dinp, dout, d); }

}  // namespace stretch::ops
