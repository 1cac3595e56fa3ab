// ops/activation.h — pointwise activations: ReLU and exact (erf) GELU, as torch's defaults.
// Backward accumulates (+=) into dinp. ReLU'(0) = 0 (torch's convention); GELU'(x) = Φ(x) + x·φ(x).
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

enum class Activation : uint8_t { Relu, Gelu };

// out [N] = act(inp [N])
void activation_forward(float* out, const float* inp, int64_t n, Activation act);
// dinp [N] += act'(inp) · dout   (= with GradInit::Overwrite; then dinp may alias dout)
void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act,
                         GradInit init = GradInit::Accumulate);

namespace ref {
void activation_forward(float* out, const float* inp, int64_t n, Activation act);
void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void activation_forward(double* out, const double* inp, int64_t n, Activation act);
void activation_backward(double* dinp, const double* dout, const double* inp, int64_t n, Activation act);
}  // namespace ref

}  // namespace stretch::ops
