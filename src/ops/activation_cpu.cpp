// ops/activation_cpu.cpp — the activations, OpenMP over blocks, vectorised with libmvec's
// erff/expf/tanhf (ops/simd_math.h, ≤ 4 ulp each). out may alias inp in forward.
#include <algorithm>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/cpu_util.h"
#include "ops/simd_math.h"

namespace stretch::ops {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;

// The tanh-based activations: value and slope as inline functions of x, so the loops below vectorise
// with libmvec's tanhf (one call per 16 lanes).
inline float value(float x, Activation act) {
  if (act == Activation::Tanh) return tanhf(x);
  return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));  // GeluAccurate
}
inline float slope(float x, Activation act) {
  if (act == Activation::Tanh) {
    const float t = tanhf(x);
    return 1.f - t * t;
  }
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));  // GeluAccurate
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
}

template <Activation A>
void tanh_forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
  for (int64_t i = 0; i < n; ++i) out[i] = value(inp[i], A);
}
template <Activation A>
void tanh_backward(float* dinp, const float* dout, const float* inp, int64_t n, GradInit init) {
  if (init == GradInit::Overwrite) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
    for (int64_t i = 0; i < n; ++i) dinp[i] = slope(inp[i], A) * dout[i];
  } else {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
    for (int64_t i = 0; i < n; ++i) dinp[i] += slope(inp[i], A) * dout[i];
  }
}
}  // namespace

void activation_forward(float* out, const float* inp, int64_t n, Activation act) {
  STRETCH_CHECK(n >= 0, "activation n=" << n);
  if (act == Activation::Tanh) return tanh_forward<Activation::Tanh>(out, inp, n);
  if (act == Activation::GeluAccurate) return tanh_forward<Activation::GeluAccurate>(out, inp, n);
  if (act == Activation::Linear) {
    if (out != inp) std::copy_n(inp, n, out);
    return;
  }
  if (act == Activation::Relu) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = inp[i] > 0.f ? inp[i] : 0.f;
  } else {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      out[i] = 0.5f * x * (1.f + erff(x * kInvSqrt2));
    }
  }
}

void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act,
                         GradInit init) {
  STRETCH_CHECK(n >= 0, "activation n=" << n);
  if (act == Activation::Tanh) return tanh_backward<Activation::Tanh>(dinp, dout, inp, n, init);
  if (act == Activation::GeluAccurate) return tanh_backward<Activation::GeluAccurate>(dinp, dout, inp, n, init);
  if (act == Activation::Linear) {
    if (init == GradInit::Overwrite) {
      if (dinp != dout) std::copy_n(dout, n, dinp);
    } else {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) dinp[i] += dout[i];
    }
    return;
  }
  if (act == Activation::Relu && init == GradInit::Overwrite) {  // may run in place (dinp == dout)
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) dinp[i] = inp[i] > 0.f ? dout[i] : 0.f;
  } else if (act == Activation::Relu) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) dinp[i] += inp[i] > 0.f ? dout[i] : 0.f;
  } else if (init == GradInit::Overwrite) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      const float g = 0.5f * (1.f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
      dinp[i] = g * dout[i];
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold / 8)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inp[i];
      const float g = 0.5f * (1.f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
      dinp[i] += g * dout[i];
    }
  }
}

}  // namespace stretch::ops
