// models/adaptive_span/config.cpp — the adaptive_span field table and checks (config.h).
#include "models/adaptive_span/config.h"

#include <cmath>

#include "core/error.h"
#include "models/apply_model_config.h"

namespace stretch::models {

const char* span_clamp_name(SpanClamp c) { return c == SpanClamp::AfterStep ? "after_step" : "forward"; }

SpanClamp parse_span_clamp(const std::string& s) {
  if (s == "forward") return SpanClamp::Forward;
  if (s == "after_step") return SpanClamp::AfterStep;
  fail_usage("--adapt-span-clamp: unknown value '" + s + "' (model config key 'adapt_span_clamp')",
             "use forward (fairseq's port) or after_step (the original)");
}

const char* span_criterion_name(SpanCriterion) { return "adaptive_span_loss"; }

SpanCriterion parse_span_criterion(const std::string& s) {
  if (s == "adaptive_span_loss") return SpanCriterion::AdaptiveSpanLoss;
  fail_usage("--criterion " + s + " does not apply to --arch adaptive_span (model config key 'criterion')",
             "use --criterion adaptive_span_loss (fairseq's criterion for this model)");
}

const std::vector<Field<AdaptiveSpanConfig>>& AdaptiveSpanConfig::fields() {
  using C = AdaptiveSpanConfig;
  using R = FieldRole;
  using namespace fields;
  static const std::vector<Field<C>> table = {
      text(&C::arch, {.key = "arch", .role = R::Free}),
      number(&C::vocab_size, {.key = "vocab_size", .help = "from dict.txt"}),
      number(&C::padding_idx, {.key = "padding_idx", .help = "from dict.txt"}),
      number(&C::tokens_per_sample, {.key = "tokens_per_sample", .role = R::Free}),
      number(&C::d_model, {.key = "d_model", .flag = "--d-model", .help = "adaptive_span: model dim C"}),
      number(&C::n_head, {.key = "n_head", .flag = "--n-head", .help = "adaptive_span: heads H"}),
      number(&C::d_inner, {.key = "d_inner", .flag = "--d-inner", .help = "adaptive_span: FFN inner dim"}),
      number(&C::n_layer, {.key = "n_layer", .flag = "--n-layer", .help = "adaptive_span: layers"}),
      number(&C::attn_span, {.key = "attn_span", .flag = "--attn-span", .help = "adaptive_span: maximum span L"}),
      number(&C::dropout, {.key = "dropout", .flag = "--dropout", .role = R::Free}),
      number(&C::emb_dropout, {.key = "emb_dropout", .flag = "--emb-dropout", .help = "adaptive_span: embedding dropout",
                               .role = R::Free}),
      number(&C::adapt_span_ramp, {.key = "adapt_span_ramp", .flag = "--adapt-span-ramp",
                                   .help = "adaptive_span: soft mask ramp R"}),
      number(&C::adapt_span_init, {.key = "adapt_span_init", .flag = "--adapt-span-init",
                                   .help = "adaptive_span: initial span fraction z", .role = R::Free}),
      number(&C::aux_loss_scaler, {.key = "aux_loss_scaler", .flag = "--aux-loss-scaler",
                                   .help = "adaptive_span: weight of the span loss", .role = R::Free}),
      boolean(&C::adapt_span_layer, {.key = "adapt_span_layer", .flag = "--adapt-span-layer",
                                     .help = "adaptive_span: one span per layer instead of per head"}),
      boolean(&C::adapt_span_renormalise,
              {.key = "adapt_span_renormalise", .flag = "--adapt-span-renormalise",
               .help = "adaptive_span: renormalise the masked attention (the original; fairseq's port does not)"}),
      choice(&C::adapt_span_clamp, span_clamp_name, parse_span_clamp, {SpanClamp::Forward, SpanClamp::AfterStep},
             {.key = "adapt_span_clamp", .flag = "--adapt-span-clamp",
              .help = "adaptive_span: clamp z in every forward (fairseq's port) or after each step (the original)"}),
      choice(&C::criterion, span_criterion_name, parse_span_criterion, {SpanCriterion::AdaptiveSpanLoss},
             {.key = "criterion", .flag = "--criterion", .role = R::Free}),
  };
  return table;
}

bool AdaptiveSpanConfig::is_key(const std::string& key) { return fields::find(fields(), key) != nullptr; }

nlohmann::json AdaptiveSpanConfig::to_json() const { return fields::to_json(fields(), *this); }

AdaptiveSpanConfig AdaptiveSpanConfig::from_json(const nlohmann::json& j) {
  AdaptiveSpanConfig c;
  c.apply_overrides(j, "model config");
  return c;
}

void AdaptiveSpanConfig::apply_overrides(const nlohmann::json& j, const std::string& source) {
  fields::apply_model_config(
      fields(), *this, j, source,
      [](const std::string& key) { return "model config key '" + key + "' does not apply to --arch adaptive_span"; },
      "adaptive_span's keys: d_model, n_head, d_inner, n_layer, attn_span, dropout, emb_dropout, "
      "adapt_span_ramp, adapt_span_init, aux_loss_scaler, adapt_span_layer, adapt_span_renormalise, "
      "adapt_span_clamp, criterion");
}

namespace {
[[noreturn]] void bad(const char* flag, const char* key, const std::string& value, const std::string& why) {
  fail_usage(std::string(flag) + " " + value + " (model config key '" + key + "'): " + why,
             "see `stretch train --help` (Model) or docs/fairseq.md, Adaptive Span");
}
std::string text_of(double v) {
  nlohmann::json j = v;
  return j.dump();
}
}  // namespace

void AdaptiveSpanConfig::validate() const {
  if (vocab_size < 0) bad("(dict.txt)", "vocab_size", std::to_string(vocab_size), "must be >= 0");
  auto positive = [](int64_t v, const char* flag, const char* key) {
    if (v < 1) bad(flag, key, std::to_string(v), "must be an integer >= 1");
  };
  positive(d_model, "--d-model", "d_model");
  positive(n_head, "--n-head", "n_head");
  positive(d_inner, "--d-inner", "d_inner");
  positive(n_layer, "--n-layer", "n_layer");
  positive(attn_span, "--attn-span", "attn_span");
  positive(adapt_span_ramp, "--adapt-span-ramp", "adapt_span_ramp");
  if (d_model % n_head != 0)
    bad("--n-head", "n_head", std::to_string(n_head),
        "must divide --d-model " + std::to_string(d_model) + " (fairseq asserts d_model % n_head == 0)");
  if (n_layer >= 4096) bad("--n-layer", "n_layer", std::to_string(n_layer), "must be < 4096 (distinct dropout masks)");
  if (attn_span >= (int64_t{1} << 24)) bad("--attn-span", "attn_span", std::to_string(attn_span), "must be < 2^24");
  const std::pair<const char*, const char*> names[] = {{"--dropout", "dropout"}, {"--emb-dropout", "emb_dropout"}};
  const float probs[] = {dropout, emb_dropout};
  for (int i = 0; i < 2; ++i)
    if (!(probs[i] >= 0.f && probs[i] < 1.f)) bad(names[i].first, names[i].second, text_of(probs[i]), "must be in [0, 1)");
  if (!std::isfinite(adapt_span_init))
    bad("--adapt-span-init", "adapt_span_init", text_of(adapt_span_init), "must be a finite number");
  if (!std::isfinite(aux_loss_scaler) || aux_loss_scaler < 0)
    bad("--aux-loss-scaler", "aux_loss_scaler", text_of(aux_loss_scaler), "must be a finite number >= 0");
}

}  // namespace stretch::models
