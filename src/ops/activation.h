// ops/activation.h — pointwise activations: ReLU and exact (erf) GELU, as torch's defaults.
// Backward accumulates (+=) into dinp.
#pragma once
#include <cstdint>

namespace stretch::ops {

enum class Activation : uint8_t { Relu, Gelu };

// out [N] = act(inp [N])
void activation_forward(float* out, const float* inp, int64_t n, Activation act);
// dinp [N] += act'(inp) · dout
void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act);

namespace ref {
void activation_forward(float* out, const float* inp, int64_t n, Activation act);
void activation_backward(float* dinp, const float* dout, const float* inp, int64_t n, Activation act);
}  // namespace ref

}  // namespace stretch::ops
