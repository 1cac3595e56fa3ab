// ops/row_gather.h — rows of a matrix picked by index, and the adjoint scatter-add: what the
// adaptive softmax and the adaptive input use to route each token's row to its vocabulary band
// (fairseq's index_select / masked assignment) without a dense mask over [N, C].
// Contract: rows[i] in [0, N) (checked: a bad index throws stretch::Error naming its offset).
// row_gather_backward ACCUMULATES (+=), in index order, so repeated indices sum and the result
// is the same for any thread count. Scatter (out[rows[i]] = x[i] for disjoint rows) is
// row_gather_backward into a zeroed buffer; its backward is row_gather_forward into dx (+=).
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

struct RowGatherDims {
  int64_t n = 0;     // rows picked: n
  int64_t rows = 0;  // rows of the source: N
  int64_t c = 0;     // columns: C
};

// out [n, C] = x [N, C] [rows [n]]   (Accumulate: out += instead)
void row_gather_forward(float* out, const float* x, const int64_t* rows, const RowGatherDims& d,
                        GradInit init = GradInit::Overwrite);
// dx [N, C] += Σ_{i: rows[i] = r} dout[i]
void row_gather_backward(float* dx, const float* dout, const int64_t* rows, const RowGatherDims& d);

namespace ref {
void row_gather_forward(float* out, const float* x, const int64_t* rows, const RowGatherDims& d);
void row_gather_backward(float* dx, const float* dout, const int64_t* rows, const RowGatherDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void row_gather_forward(double* out, const double* x, const int64_t* rows, const RowGatherDims& d);
void row_gather_backward(double* dx, const double* dout, const int64_t* rows, const RowGatherDims& d);
}  // namespace ref

}  // namespace stretch::ops
