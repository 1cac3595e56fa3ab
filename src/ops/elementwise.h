// ops/elementwise.h — add (residuals), scale, and the head split/merge transposes.
// add/scale backward is trivial and done by the autograd layer with these same kernels.
#pragma once
#include <cstdint>

namespace stretch::ops {

// out [N] = a [N] + b [N] (out may alias a or b)
void add_forward(float* out, const float* a, const float* b, int64_t n);
// out [N] += alpha · x [N]
void axpy(float* out, const float* x, float alpha, int64_t n);
// out [N] = alpha · x [N]
void scale_forward(float* out, const float* x, float alpha, int64_t n);

struct HeadDims {
  int64_t b = 0, t = 0, h = 0, d = 0;
};
// out [B, H, T, D] = inp [B, T, H·D] viewed as [B, T, H, D] with dims 1 and 2 swapped.
// The inverse (merge) is the same permutation backwards. Backward of split is merge and vice versa.
void split_heads(float* out, const float* inp, const HeadDims& d);
// out [B, T, H·D] = inp [B, H, T, D]
void merge_heads(float* out, const float* inp, const HeadDims& d);

namespace ref {
void add_forward(float* out, const float* a, const float* b, int64_t n);
void axpy(float* out, const float* x, float alpha, int64_t n);
void scale_forward(float* out, const float* x, float alpha, int64_t n);
void split_heads(float* out, const float* inp, const HeadDims& d);
void merge_heads(float* out, const float* inp, const HeadDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void add_forward(double* out, const double* a, const double* b, int64_t n);
void split_heads(double* out, const double* inp, const HeadDims& d);
void merge_heads(double* out, const double* inp, const HeadDims& d);
}  // namespace ref

}  // namespace stretch::ops
