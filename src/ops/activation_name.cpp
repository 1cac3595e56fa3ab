// ops/activation_name.cpp — fairseq's names of the activations (utils.get_activation_fn).
#include "ops/activation.h"

namespace stretch::ops {

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::GeluAccurate: return "gelu_accurate";
    case Activation::Tanh: return "tanh";
    case Activation::Linear: return "linear";
  }
  return "?";
}

std::optional<Activation> activation_from_name(std::string_view name) {
  for (Activation a : {Activation::Relu, Activation::Gelu, Activation::GeluAccurate, Activation::Tanh,
                       Activation::Linear})
    if (name == activation_name(a)) return a;
  if (name == "gelu_fast") return Activation::GeluAccurate;  // fairseq's deprecated name of gelu_accurate
  return std::nullopt;
}

std::string activation_choices() { return "relu, gelu, gelu_accurate (or its old name gelu_fast), tanh, linear"; }

}  // namespace stretch::ops
