// ops/dropout.h — inverted dropout with a counter-based mask: element i of a call is kept iff
// uniform(philox(seed, stream, i)) ≥ p, so the mask depends only on (seed, stream, i), never on
// the thread count; backward regenerates it instead of storing it. Kept values are scaled 1/(1−p).
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

struct DropoutParams {
  float p = 0.f;        // drop probability in [0, 1)
  uint64_t seed = 0;    // run seed
  uint64_t stream = 0;  // distinct per call site and step (caller's bookkeeping)
};

// out [N] = inp [N] · mask / (1 − p)
void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p);
// dinp [N] += dout [N] · mask / (1 − p)   (= with GradInit::Overwrite)
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p,
                      GradInit init = GradInit::Accumulate);
// The residual connection with dropout on its branch, in one pass:
// out [N] = res [N] + inp [N] · mask / (1 − p)   (out may alias res). Its backward is dout for res
// and dropout_backward(dout) for inp.
void dropout_add_forward(float* out, const float* res, const float* inp, int64_t n, const DropoutParams& p);
// The keep decision for element i (shared by every implementation, the attention kernel too).
bool dropout_keep(const DropoutParams& p, int64_t i);
// The same decisions for elements 4·block .. 4·block+3 from one Philox call: bit j is
// dropout_keep(p, 4·block + j). dropout_keep is defined through it, so they cannot disagree.
uint32_t dropout_keep4(const DropoutParams& p, int64_t block);
// The scale factors of elements i0 .. i0+n−1: z[k] = dropout_keep(p, i0 + k) ? 1/(1−p) : 0, from
// the SIMD Philox (philox4x32_blocks); the same decisions as dropout_keep, bit for bit.
void dropout_factors(const DropoutParams& p, int64_t i0, int64_t n, float* z /*[n]*/);

namespace ref {
void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p);
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p);
void dropout_add_forward(float* out, const float* res, const float* inp, int64_t n, const DropoutParams& p);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void dropout_forward(double* out, const double* inp, int64_t n, const DropoutParams& p);
void dropout_backward(double* dinp, const double* dout, int64_t n, const DropoutParams& p);
void dropout_add_forward(double* out, const double* res, const double* inp, int64_t n, const DropoutParams& p);
}  // namespace ref

}  // namespace stretch::ops
