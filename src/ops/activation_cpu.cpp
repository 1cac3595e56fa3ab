// ops/activation_cpu.cpp — ReLU and exact GELU, OpenMP over blocks, vectorised with libmvec's
// erff/expf (ops/simd_math.h, ≤ 4 ulp each). out may alias inp in forward.
#include "core/error.h"
#include "ops/activation.h"
#include "ops/cpu_util.h"
#include "ops/simd_math.h"

namespace stretch::ops {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
}  // namespace

void activation_forward(float* out, const float* inp, int64_t n, Activation act) {
  STRETCH_CHECK(n >= 0, "activation n=" << n);
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
