// models/activation_field.h — the activation_fn key / --activation-fn flag of the families with an FFN
// (transformer_lm, roberta): fairseq's names (ops/activation.h), its deprecated gelu_fast accepted with
// fairseq's warning and saved as gelu_accurate.
#pragma once
#include "core/error.h"
#include "core/log.h"
#include "models/config_fields.h"
#include "ops/activation.h"

namespace stretch::models {

inline ops::Activation parse_activation_fn(const std::string& a) {
  const auto act = ops::activation_from_name(a);
  if (!act) fail_usage("--activation-fn: unknown activation '" + a + "'", "use one of " + ops::activation_choices());
  if (a == "gelu_fast") log_once(LogLevel::Warning, "--activation-fn=gelu_fast has been renamed to gelu_accurate");
  return *act;
}

template <class C>
Field<C> activation_field(ops::Activation C::*member) {
  using ops::Activation;
  Field<C> f = fields::choice(member, ops::activation_name, parse_activation_fn,
                              {Activation::Relu, Activation::Gelu, Activation::GeluAccurate, Activation::Tanh,
                               Activation::Linear},
                              {.key = "activation_fn", .flag = "--activation-fn", .help = "FFN activation"});
  f.spec.choices.push_back("gelu_fast");  // fairseq's old name, still accepted
  return f;
}

}  // namespace stretch::models
