// ops/linear_reference.cpp — the naive oracle for linear: triple loops, double accumulation.
// Kept forever; templated on the scalar so the float64 instantiation drives the FD checks.
#include "ops/linear.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void forward(T* out, const T* inp, const T* weight, const T* bias, const LinearDims& d) {
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t o = 0; o < d.out_features; ++o) {
      double acc = bias ? static_cast<double>(bias[o]) : 0.0;
      for (int64_t i = 0; i < d.in_features; ++i)
        acc += static_cast<double>(inp[n * d.in_features + i]) * weight[o * d.in_features + i];
      out[n * d.out_features + o] = static_cast<T>(acc);
    }
  }
}

template <class T>
void backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const LinearDims& d) {
  const int64_t I = d.in_features, O = d.out_features;
  if (dinp) {
    for (int64_t n = 0; n < d.n; ++n) {
      if (d.skip > 0 && n % d.block < d.skip) continue;  // a row whose input gradient nobody reads
      for (int64_t i = 0; i < I; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < O; ++o) acc += static_cast<double>(dout[n * O + o]) * weight[o * I + i];
        dinp[n * I + i] = static_cast<T>(dinp[n * I + i] + acc);
      }
    }
  }
  if (dweight) {
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i) {
        double acc = 0.0;
        for (int64_t n = 0; n < d.n; ++n) acc += static_cast<double>(dout[n * O + o]) * inp[n * I + i];
        dweight[o * I + i] = static_cast<T>(dweight[o * I + i] + acc);
      }
  }
  if (dbias) {
    for (int64_t o = 0; o < O; ++o) {
      double acc = 0.0;
      for (int64_t n = 0; n < d.n; ++n) acc += dout[n * O + o];
      dbias[o] = static_cast<T>(dbias[o] + acc);
    }
  }
}

}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearDims& d,
                    LinearEpilogue epi) {
  forward(out, inp, weight, bias, d);
  if (epi == LinearEpilogue::Relu)
    for (int64_t i = 0; i < d.n * d.out_features; ++i) out[i] = out[i] > 0.f ? out[i] : 0.f;
}
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, const LinearDims& d) {
  backward(dinp, dweight, dbias, dout, inp, weight, d);
}
void linear_forward(double* out, const double* inp, const double* weight, const double* bias, const LinearDims& d) {
  forward(out, inp, weight, bias, d);
}
void linear_backward(double* dinp, double* dweight, double* dbias, const double* dout, const double* inp,
                     const double* weight, const LinearDims& d) {
  backward(dinp, dweight, dbias, dout, inp, weight, d);
}

}  // namespace stretch::ops::ref
