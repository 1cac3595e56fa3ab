// ops/elementwise_reference.cpp — naive oracles for add, axpy, scale and the head transposes.
#include "ops/elementwise.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void add(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// [B, T, H, D] -> [B, H, T, D] (split) or back (merge), element by element.
template <class T>
void transpose_heads(T* out, const T* inp, const HeadDims& d, bool split) {
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.t; ++t)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t k = 0; k < d.d; ++k) {
          const int64_t bthd = ((b * d.t + t) * d.h + h) * d.d + k;
          const int64_t bhtd = ((b * d.h + h) * d.t + t) * d.d + k;
          if (split) out[bhtd] = inp[bthd];
          else out[bthd] = inp[bhtd];
        }
}

}  // namespace

void add_forward(float* out, const float* a, const float* b, int64_t n) { add(out, a, b, n); }
void add_forward(double* out, const double* a, const double* b, int64_t n) { add(out, a, b, n); }
void axpy(float* out, const float* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += alpha * x[i];
}
void scale_forward(float* out, const float* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}
void split_heads(float* out, const float* inp, const HeadDims& d) { transpose_heads(out, inp, d, true); }
void merge_heads(float* out, const float* inp, const HeadDims& d) { transpose_heads(out, inp, d, false); }
void split_heads(double* out, const double* inp, const HeadDims& d) { transpose_heads(out, inp, d, true); }
void merge_heads(double* out, const double* inp, const HeadDims& d) { transpose_heads(out, inp, d, false); }

}  // namespace stretch::ops::ref
