// ops/row_gather_reference.cpp — naive oracle: a row copy per index, and a scatter-add in index order.
#include "ops/row_gather.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void forward(T* out, const T* x, const int64_t* rows, const RowGatherDims& d) {
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t c = 0; c < d.c; ++c) out[i * d.c + c] = x[rows[i] * d.c + c];
}

template <class T>
void backward(T* dx, const T* dout, const int64_t* rows, const RowGatherDims& d) {
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t c = 0; c < d.c; ++c) dx[rows[i] * d.c + c] += dout[i * d.c + c];
}

}  // namespace

void row_gather_forward(float* out, const float* x, const int64_t* rows, const RowGatherDims& d) {
  forward(out, x, rows, d);
}
void row_gather_backward(float* dx, const float* dout, const int64_t* rows, const RowGatherDims& d) {
  backward(dx, dout, rows, d);
}
void row_gather_forward(double* out, const double* x, const int64_t* rows, const RowGatherDims& d) {
  forward(out, x, rows, d);
}
void row_gather_backward(double* dx, const double* dout, const int64_t* rows, const RowGatherDims& d) {
  backward(dx, dout, rows, d);
}

}  // namespace stretch::ops::ref
