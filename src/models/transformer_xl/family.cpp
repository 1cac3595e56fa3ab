// models/transformer_xl/family.cpp — transformer_xl behind the registry: presets, flags from the
// field table, overrides, the resume check and the builder.
#include "models/transformer_xl/family.h"

#include "models/transformer_xl/transformer_xl.h"

namespace stretch::models {
namespace {

nlohmann::json resolve(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample) {
  TransformerXLConfig c = transformer_xl_preset(arch);
  c.tokens_per_sample = tokens_per_sample;
  c.max_target_positions = tokens_per_sample;
  c.apply_overrides(given, "the model flags");
  return c.to_json();
}

nlohmann::json apply(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse,
                     const std::string& source) {
  TransformerXLConfig c;
  c.apply_overrides(config, source + " (stored config)");
  c.apply_overrides(overrides, source);
  return c.to_json();
}

std::string differences(const nlohmann::json& saved, const nlohmann::json& wanted) {
  return structural_differences(TransformerXLConfig::from_json(saved), TransformerXLConfig::from_json(wanted));
}

void validate(const nlohmann::json& config) { TransformerXLConfig::from_json(config).validate(); }

std::unique_ptr<LanguageModel> build(const nlohmann::json& config) {
  return std::make_unique<TransformerXL>(TransformerXLConfig::from_json(config));
}

}  // namespace

const Family& transformer_xl_family() {
  static const Family f{
      .name = "transformer_xl",
      .archs = {{"transformer_xl", "fairseq's transformer_xl (HF TransfoXL): 12 layers, C 500, 10 heads of 50, "
                                   "d_inner 1000 (--n-layer, --d-model, ... as in fairseq)"},
                {"transformer_xl_enwik8", "the enwik8 base model: 12 layers, C 512, 8 heads of 64, d_inner 2048, "
                                          "dropout 0.1, mem_len 512"},
                {"transformer_xl_tiny", "2 layers, C 64, 4 heads of 16, d_inner 128 (tests)"}},
      .fields = fields::specs(TransformerXLConfig::fields()),
      .resolve = resolve,
      .apply_overrides = apply,
      .structural_differences = differences,
      .is_key = TransformerXLConfig::is_key,
      .validate = validate,
      .build = build,
  };
  return f;
}

}  // namespace stretch::models
