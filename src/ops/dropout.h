// ops/dropout.h — inverted dropout with a counter-based mask: element i of a call is kept iff
// uniform(philox(seed, stream, i)) ≥ p, so the mask depends only on (seed, stream, i), never on
// the thread count; backward regenerates it instead of storing it. Kept values are scaled 1/(1−p).
#pragma once
#include <cstdint>

namespace stretch::ops {

struct DropoutParams {
  float p = 0.f;        // drop probability in [0, 1)
  uint64_t seed = 0;    // run seed
  uint64_t stream = 0;  // distinct per call site and step (caller's bookkeeping)
};

// out [N] = inp [N] · mask / (1 − p)
void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p);
// dinp [N] += dout [N] · mask / (1 − p)
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p);
// The keep decision for element i (shared by every implementation, the attention kernel too).
bool dropout_keep(const DropoutParams& p, int64_t i);
// The same decisions for elements 4·block .. 4·block+3 from one Philox call: bit j is
// dropout_keep(p, 4·block + j). dropout_keep is defined through it, so they cannot disagree.
uint32_t dropout_keep4(const DropoutParams& p, int64_t block);

namespace ref {
void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p);
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void dropout_forward(double* out, const double* inp, int64_t n, const DropoutParams& p);
void dropout_backward(double* dinp, const double* dout, int64_t n, const DropoutParams& p);
}  // namespace ref

}  // namespace stretch::ops
