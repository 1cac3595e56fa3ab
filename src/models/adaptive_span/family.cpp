// models/adaptive_span/family.cpp — adaptive_span behind the registry: fairseq's
// AdaptiveSpanSmallConfig defaults, flags from the field table, overrides, the resume check, the builder.
#include "models/adaptive_span/family.h"

#include "models/adaptive_span/adaptive_span_lm.h"

namespace stretch::models {
namespace {

nlohmann::json resolve(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample) {
  AdaptiveSpanConfig c;
  c.arch = arch;
  c.tokens_per_sample = tokens_per_sample;
  c.apply_overrides(given, "the model flags");
  return c.to_json();
}

nlohmann::json apply(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse,
                     const std::string& source) {
  AdaptiveSpanConfig c;
  c.apply_overrides(config, source + " (stored config)");
  c.apply_overrides(overrides, source);
  return c.to_json();
}

std::string differences(const nlohmann::json& saved, const nlohmann::json& wanted) {
  return fields::structural_differences(AdaptiveSpanConfig::fields(), AdaptiveSpanConfig::from_json(saved),
                                        AdaptiveSpanConfig::from_json(wanted));
}

void validate(const nlohmann::json& config) { AdaptiveSpanConfig::from_json(config).validate(); }

std::unique_ptr<LanguageModel> build(const nlohmann::json& config) {
  return std::make_unique<AdaptiveSpanLM>(AdaptiveSpanConfig::from_json(config));
}

}  // namespace

const Family& adaptive_span_family() {
  static const Family f{
      .name = "adaptive_span",
      .archs = {{"adaptive_span", "fairseq's examples/adaptive_span (AdaptiveSpanSmallConfig): 8 layers, d_model 256, "
                                  "4 heads, d_inner 1024, attn_span 1024, learned spans (ramp 32)"}},
      .fields = fields::specs(AdaptiveSpanConfig::fields()),
      .resolve = resolve,
      .apply_overrides = apply,
      .structural_differences = differences,
      .is_key = AdaptiveSpanConfig::is_key,
      .validate = validate,
      .build = build,
  };
  return f;
}

}  // namespace stretch::models
