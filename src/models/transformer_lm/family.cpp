// models/transformer_lm/family.cpp — transformer_lm behind the registry: presets, flags from
// the field table, overrides, the resume check and the builder.
#include "models/transformer_lm/family.h"

#include "core/log.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {
namespace {

nlohmann::json resolve(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample) {
  TransformerLMConfig c = preset(arch);
  c.tokens_per_sample = tokens_per_sample;
  c.max_target_positions = tokens_per_sample;  // fairseq: = tokens_per_sample if unset
  c.apply_overrides(given, "the model flags");
  return c.to_json();
}

nlohmann::json apply(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse use,
                     const std::string& source) {
  TransformerLMConfig cfg;
  cfg.apply_overrides(config, source + " (stored config)");
  nlohmann::json o = overrides;
  // The README commands override max_target_positions to the evaluation length (it sized the
  // fork's buffers); for learned positions that would resize the trained table, so there it is
  // ignored (said once) and an evaluation past the table gives the learned-positions usage error.
  if (use == OverrideUse::Evaluation && o.is_object() && o.contains("max_target_positions")) {
    TransformerLMConfig probe = cfg;
    probe.apply_overrides(o, source);  // the position method after the overrides
    if (probe.pos == PosMethod::Learned && probe.max_target_positions != cfg.max_target_positions) {
      log_once(LogLevel::Warning, "--model-overrides max_target_positions is ignored for learned positions: the table "
                                  "keeps its trained size (max_target_positions = " +
                                      std::to_string(cfg.max_target_positions) + ")");
      o.erase("max_target_positions");
    }
  }
  cfg.apply_overrides(o, source);
  return cfg.to_json();
}

std::string differences(const nlohmann::json& saved, const nlohmann::json& wanted) {
  return structural_differences(TransformerLMConfig::from_json(saved), TransformerLMConfig::from_json(wanted));
}

void validate(const nlohmann::json& config) { TransformerLMConfig::from_json(config).validate(); }

std::unique_ptr<LanguageModel> build(const nlohmann::json& config) {
  return std::make_unique<TransformerLM>(TransformerLMConfig::from_json(config));
}

}  // namespace

const Family& transformer_lm_family() {
  static const Family f{
      .name = "transformer_lm",
      .archs = {{"transformer_lm", "fairseq's base LM: 6 layers, C 512, 8 heads, FFN 2048"},
                {"transformer_lm_wiki103", "the paper's 247M model: 16 layers, C 1024, 8 heads, FFN 4096, dropout 0.3, adaptive input and tied adaptive softmax (cutoffs 20000,60000, factor 4)"},
                {"transformer_lm_baevski_wiki103", "alias of transformer_lm_wiki103"},
                {"transformer_lm_small", "4 layers, C 256, 4 heads, FFN 1024 (CPU work)"},
                {"transformer_lm_tiny", "2 layers, C 128, 4 heads, FFN 512 (tests)"}},
      .fields = fields::specs(TransformerLMConfig::fields()),
      .resolve = resolve,
      .apply_overrides = apply,
      .structural_differences = differences,
      .is_key = TransformerLMConfig::is_key,
      .validate = validate,
      .build = build,
  };
  return f;
}

}  // namespace stretch::models
