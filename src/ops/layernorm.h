// ops/layernorm.h — LayerNorm over the last dimension (eps 1e-5 as fairseq), affine.
// Forward saves mean and reciprocal std per row for backward. Backward accumulates (+=).
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

struct LayerNormDims {
  int64_t n = 0;  // rows: B·T
  int64_t c = 0;  // normalised dim C
  float eps = 1e-5f;
};

// out [N, C], mean [N], rstd [N] = layernorm(inp [N, C]; weight [C], bias [C])
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, const LayerNormDims& d);
// dinp [N, C] += (= with dinp_init Overwrite), dweight [C] +=, dbias [C] += (any may be null)
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const LayerNormDims& d,
                        GradInit dinp_init = GradInit::Accumulate);

namespace ref {
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, const LayerNormDims& d);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const LayerNormDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void layernorm_forward(double* out, double* mean, double* rstd, const double* inp, const double* weight,
                       const double* bias, const LayerNormDims& d);
void layernorm_backward(double* dinp, double* dweight, double* dbias, const double* dout, const double* inp,
                        const double* weight, const double* mean, const double* rstd, const LayerNormDims& d);
}  // namespace ref

}  // namespace stretch::ops
