// ops/activation.h — pointwise activations, fairseq's --activation-fn set (utils.get_activation_fn):
//   relu           max(x, 0); relu'(0) = 0 (torch's convention)
//   gelu           exact (erf) GELU x·Φ(x), torch's default; gelu'(x) = Φ(x) + x·φ(x)
//   gelu_accurate  fairseq's tanh approximation ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (alias gelu_fast)
//   tanh           tanh(x); tanh' = 1 − tanh²
//   linear         x (fairseq's identity; the FFN skips the op)
// Backward accumulates (+=) into dinp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ops/grad_init.h"

namespace stretch::ops {

enum class Activation : uint8_t { Relu, Gelu, GeluAccurate, Tanh, Linear };

// fairseq's name of each (the config key activation_fn, --activation-fn): "relu", "gelu", "gelu_accurate",
// "tanh", "linear"; and back. activation_from_name takes fairseq's deprecated "gelu_fast" for
// gelu_accurate (the caller warns, as fairseq does); nullopt for any other name.
const char* activation_name(Activation a);
std::optional<Activation> activation_from_name(std::string_view name);
// "relu, gelu, gelu_accurate (gelu_fast), tanh, linear": what a refusal lists.
std::string activation_choices();

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
