// position/attention_position.cpp — see attention_position.h.
#include "position/attention_position.h"

namespace stretch::position {

using ops::BiasPolicy;

AlibiBias::AlibiBias(int64_t heads, float slope_scale, AttentionWindow w)
    : slopes_(autograd::alibi_slopes_var(heads)), slope_scale_(slope_scale), w_(w) {}

AlibiBias::AlibiBias(autograd::Var slopes, float slope_scale, AlibiShapeSpec shape, AttentionWindow w)
    : slopes_(std::move(slopes)), slope_scale_(slope_scale), shape_(shape), w_(w) {}

void NoBias::set_bias(autograd::AttentionInputs& in) const {
  in.bias = BiasPolicy::None;
  in.window = w_.window;
}

void AlibiBias::set_bias(autograd::AttentionInputs& in) const {
  in.bias = BiasPolicy::Alibi;
  in.slopes = slopes_;
  in.slope_scale = slope_scale_ * factor_;
  in.alibi_shape = shape_.shape;
  in.alibi_cap = shape_.cap;
  in.window = w_.window;
}

void T5Bias::set_bias(autograd::AttentionInputs& in) const {
  in.bias = BiasPolicy::T5;
  in.t5_table = table_;
  in.t5_num_buckets = num_buckets_;
  in.t5_max_distance = max_distance_;
  in.window = w_.window;
}

void Rotary::set_bias(autograd::AttentionInputs& in) const {
  in.bias = BiasPolicy::None;
  in.window = w_.window;
}

void Rotary::rotate(autograd::Var& q, autograd::Var& k, int64_t q_pos0, int64_t k_pos0) const {
  q = autograd::rope(q, q_pos0, base_);
  k = autograd::rope(k, k_pos0, base_);
}

}  // namespace stretch::position
