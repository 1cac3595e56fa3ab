// ops/activation_reference.cpp — the naive oracle for ReLU and exact GELU, computed in double:
//   gelu(x) = x·Φ(x) = ½x(1 + erf(x/√2)),  gelu'(x) = Φ(x) + x·φ(x),  φ(x) = exp(−x²/2)/√(2π).
#include <cmath>

#include "ops/activation.h"

namespace stretch::ops::ref {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <class T>
void forward(T* out, const T* inp, int64_t n, Activation act) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = static_cast<T>(act == Activation::Relu ? (x > 0 ? x : 0.0) : 0.5 * x * (1.0 + std::erf(x * kInvSqrt2)));
  }
}

template <class T>
void backward(T* dinp, const T* dout, const T* inp, int64_t n, Activation act) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    double g;
    if (act == Activation::Relu) {
      g = x > 0 ? 1.0 : 0.0;
    } else {
      g = 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    }
    dinp[i] = static_cast<T>(dinp[i] + g * static_cast<double>(dout[i]));
  }
}

}  // namespace

void activation_forward(float* out, const float* inp, int64_t n, Activation act) { forward(out, inp, n, act); }
void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act) {
  backward(dinp, dout, inp, n, act);
}
void activation_forward(double* out, const double* inp, int64_t n, Activation act) { forward(out, inp, n, act); }
void activation_backward(double* dinp, const double* dout, const double* inp, int64_t n, Activation act) {
  backward(dinp, dout, inp, n, act);
}

}  // namespace stretch::ops::ref
