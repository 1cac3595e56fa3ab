// models/roberta/encoder_position.cpp — see encoder_position.h.
#include "models/roberta/encoder_position.h"

namespace stretch::models {

void SymmetricAlibi::set_bias(autograd::AttentionInputs& in) const {
  in.mask = ops::AttentionMask::Bidirectional;
  in.bias = ops::BiasPolicy::AlibiSym;
  in.slopes = slopes_;
  in.slope_scale = slope_scale_;
}

void BidirectionalNoBias::set_bias(autograd::AttentionInputs& in) const {
  in.mask = ops::AttentionMask::Bidirectional;
  in.bias = ops::BiasPolicy::None;
}

}  // namespace stretch::models
