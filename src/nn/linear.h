// nn/linear.h — the small modules every family shares: Linear, Embedding, LayerNorm.
// Contract: a module holds Vars registered in a ParameterList under fairseq state-dict names
// (prefix + "weight" / "bias"); calling it is the autograd function of the same name. Modules
// only build and apply; a family's init() fills their values (fairseq's initialisers and
// draw order live with the family, nn/parameters.h has the initialisers).
#pragma once
#include <string>

#include "autograd/functions.h"
#include "core/error.h"
#include "nn/parameters.h"

namespace stretch::nn {

enum class Bias : uint8_t { With, Without };
// How a Linear's weight is stored: OutIn [O, I] (torch's nn.Linear), or InOut [I, O], another
// module's [O', I'] weight used transposed (fairseq's TiedLinear(transpose=True): the adaptive
// softmax's tail projection tied to the adaptive input's band projection). InOut has no bias.
enum class WeightLayout : uint8_t { OutIn, InOut };

// y [.., O] = x [.., I] · weight [O, I]ᵀ (+ bias [O]), or x · weight [I, O] (InOut). A tied Linear
// reuses another module's weight (the token embedding as output projection) and registers nothing.
struct Linear {
  Var weight;  // [O, I] (OutIn) or [I, O] (InOut)
  Var bias;    // [O], undefined without bias
  WeightLayout layout = WeightLayout::OutIn;
  static Linear make(ParameterList& params, const std::string& prefix, int64_t in, int64_t out, Bias b = Bias::With) {
    Linear l;
    l.weight = params.add(prefix + "weight", {out, in});
    if (b == Bias::With) l.bias = params.add(prefix + "bias", {out});
    return l;
  }
  static Linear tied(const Var& weight, WeightLayout layout = WeightLayout::OutIn) { return {weight, Var(), layout}; }
  Var operator()(const Var& x, ops::LinearEpilogue epi = ops::LinearEpilogue::None) const {
    if (layout == WeightLayout::InOut) {
      STRETCH_CHECK(!bias.defined() && epi == ops::LinearEpilogue::None, "a transposed Linear has no bias or epilogue");
      return autograd::linear_transposed(x, weight);
    }
    return autograd::linear(x, weight, bias, epi);
  }
};

// out [.., C] = scale · weight [V, C] [ids]; row padding_idx is the pad row (zero at init).
struct Embedding {
  Var weight;  // [V, C]
  static Embedding make(ParameterList& params, const std::string& name, int64_t rows, int64_t dim) {
    return {params.add(name, {rows, dim})};
  }
  Var operator()(const Tensor& ids, float scale = 1.0f) const { return autograd::embedding(ids, weight, scale); }
};

// y [.., C] = LayerNorm(x) · weight [C] + bias [C]
struct LayerNorm {
  Var weight, bias;
  static LayerNorm make(ParameterList& params, const std::string& prefix, int64_t dim) {
    LayerNorm n;
    n.weight = params.add(prefix + "weight", {dim});
    n.bias = params.add(prefix + "bias", {dim});
    return n;
  }
  bool defined() const { return weight.defined(); }
  void init() {  // weight 1, bias 0 (torch's default)
    init_constant(weight, 1.f);
    init_constant(bias, 0.f);
  }
  Var operator()(const Var& x) const { return autograd::layer_norm(x, weight, bias); }
};

}  // namespace stretch::nn
