// nn/feed_forward.h — the position-wise FFN of a Transformer block:
//   y [.., C] = fc2(dropout(act(fc1(x [.., C]))))   fc1 [F, C], fc2 [C, F] (fairseq: fc1, fc2)
// With NormFormer's --scale-fc, a LayerNorm [F] (fairseq: ffn_layernorm, registered before fc1)
// between the activation dropout and fc2: fc2(LN(dropout(act(fc1(x))))).
// ReLU runs as fc1's GEMM epilogue (one op, only its output kept for backward); linear (fairseq's
// identity) runs no op.
#pragma once
#include "nn/linear.h"
#include "ops/activation.h"
#include "ops/dropout.h"

namespace stretch::nn {

struct FeedForward {
  Linear fc1, fc2;
  LayerNorm norm;  // ffn_layernorm [F] (--scale-fc), else undefined
  ops::Activation activation = ops::Activation::Relu;
  static FeedForward make(ParameterList& params, const std::string& prefix, int64_t dim, int64_t ffn_dim,
                          ops::Activation act, bool scale_fc = false) {
    FeedForward f;
    if (scale_fc) f.norm = LayerNorm::make(params, prefix + "ffn_layernorm.", ffn_dim);
    f.fc1 = Linear::make(params, prefix + "fc1.", dim, ffn_dim);
    f.fc2 = Linear::make(params, prefix + "fc2.", ffn_dim, dim);
    f.activation = act;
    return f;
  }
  // activation_dropout: applied to the activations (p = 0 in evaluation).
  Var operator()(const Var& x, const ops::DropoutParams& activation_dropout) const {
    Var h = activation == ops::Activation::Relu     ? fc1(x, ops::LinearEpilogue::Relu)
            : activation == ops::Activation::Linear ? fc1(x)
                                                    : autograd::activation(fc1(x), activation);
    h = autograd::dropout(h, activation_dropout);
    if (norm.defined()) h = norm(h);
    return fc2(h);
  }
};

}  // namespace stretch::nn
