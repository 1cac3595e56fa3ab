// ops/activation_reference.cpp — the naive oracle of every activation, computed in double:
//   gelu(x) = x·Φ(x) = ½x(1 + erf(x/√2)),  gelu'(x) = Φ(x) + x·φ(x),  φ(x) = exp(−x²/2)/√(2π);
//   gelu_accurate(x) = ½x(1 + t),  t = tanh(u),  u = √(2/π)(x + 0.044715x³),
//     gelu_accurate'(x) = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²);
//   tanh'(x) = 1 − tanh²(x);  linear'(x) = 1.
#include <cmath>

#include "ops/activation.h"

namespace stretch::ops::ref {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

double value(double x, Activation act) {
  switch (act) {
    case Activation::Relu: return x > 0 ? x : 0.0;
    case Activation::Gelu: return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
    case Activation::GeluAccurate: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
    case Activation::Tanh: return std::tanh(x);
    case Activation::Linear: return x;
  }
  return 0.0;
}

double slope(double x, Activation act) {
  switch (act) {
    case Activation::Relu: return x > 0 ? 1.0 : 0.0;
    case Activation::Gelu: return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case Activation::GeluAccurate: {
      const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
    }
    case Activation::Tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::Linear: return 1.0;
  }
  return 0.0;
}

template <class T>
void forward(T* out, const T* inp, int64_t n, Activation act) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(value(inp[i], act));
}

template <class T>
void backward(T* dinp, const T* dout, const T* inp, int64_t n, Activation act) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = static_cast<T>(dinp[i] + slope(inp[i], act) * static_cast<double>(dout[i]));
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
