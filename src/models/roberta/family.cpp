// models/roberta/family.cpp — the roberta encoder behind the registry: presets, flags from the
// field table, overrides, the resume check and the builder.
#include "models/roberta/family.h"

#include "models/roberta/roberta.h"

namespace stretch::models {
namespace {

nlohmann::json resolve(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample) {
  RobertaConfig c = roberta_preset(arch);
  c.tokens_per_sample = tokens_per_sample;
  c.max_positions = tokens_per_sample;  // fairseq's roberta: max_positions = tokens_per_sample if unset
  c.apply_overrides(given, "the model flags");
  return c.to_json();
}

nlohmann::json apply(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse,
                     const std::string& source) {
  RobertaConfig c;
  c.apply_overrides(config, source + " (stored config)");
  c.apply_overrides(overrides, source);
  return c.to_json();
}

std::string differences(const nlohmann::json& saved, const nlohmann::json& wanted) {
  return structural_differences(RobertaConfig::from_json(saved), RobertaConfig::from_json(wanted));
}

void validate(const nlohmann::json& config) { RobertaConfig::from_json(config).validate(); }

std::unique_ptr<LanguageModel> build(const nlohmann::json& config) {
  return std::make_unique<RobertaEncoder>(RobertaConfig::from_json(config));
}

}  // namespace

const Family& roberta_family() {
  static const Family f{
      .name = "roberta",
      .archs = {{"roberta_base", "RoBERTa's base encoder (masked_lm): 12 layers, C 768, 12 heads, FFN 3072, post-norm"},
                {"roberta", "alias of roberta_base"},
                {"roberta_small", "encoder: 4 layers, C 256, 4 heads, FFN 1024 (CPU work)"},
                {"roberta_tiny", "encoder: 2 layers, C 128, 4 heads, FFN 512 (tests)"}},
      .fields = fields::specs(RobertaConfig::fields()),
      .resolve = resolve,
      .apply_overrides = apply,
      .structural_differences = differences,
      .is_key = RobertaConfig::is_key,
      .validate = validate,
      .build = build,
  };
  return f;
}

}  // namespace stretch::models
