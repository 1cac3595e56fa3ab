// models/registry.h — the --arch registry: every architecture name (fairseq's aliases included)
// maps to a model family and a preset; everything above models/ builds, configures and checks
// models through these functions and the LanguageModel interface, never a concrete class.
// Contract:
//   * A model config is JSON with fairseq key names and "arch"; the family is found from
//     "arch". resolve_config(arch, given, L) = the preset of `arch`, then the training length L
//     (tokens_per_sample, and what the family derives from it), then the keys given on the
//     command line: the full config (vocab_size/padding_idx still to be set from dict.txt).
//   * apply_overrides(config, overrides, use): --model-overrides onto a stored config; for
//     OverrideUse::Evaluation a family may drop keys that would resize trained tensors (said once),
//     and an override that still changes a structural key (structural_differences) is a usage
//     error naming the key; the Free and Evaluation fields (and max_tokens) are the evaluation-time ones.
//   * structural_differences(saved, wanted): "" when a checkpoint of `saved` can resume a run of
//     `wanted`, else "key a (this run: b), ..." over the keys that change tensors or the function.
//   * model_fields(): the command-line fields of every family (deduplicated by key), for cli/.
// Adding a family: one folder under models/ with a `const Family& <name>_family()` and one line in
// registry.cpp's list (docs/architecture.md "Model families").
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/config_fields.h"
#include "models/language_model.h"

namespace stretch::models {

enum class OverrideUse : uint8_t { Training, Evaluation };

struct ArchEntry {
  std::string name;
  std::string help;
};

struct Family {
  std::string name;
  std::vector<ArchEntry> archs;
  std::vector<FieldSpec> fields;
  nlohmann::json (*resolve)(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample);
  nlohmann::json (*apply_overrides)(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse use,
                                    const std::string& source);
  std::string (*structural_differences)(const nlohmann::json& saved, const nlohmann::json& wanted);
  bool (*is_key)(const std::string& key);
  void (*validate)(const nlohmann::json& config);  // usage errors naming flag, key and value
  std::unique_ptr<LanguageModel> (*build)(const nlohmann::json& config);
};

std::vector<const Family*> families();
// The family of an --arch name; a usage error listing the names otherwise.
const Family& family_of_arch(const std::string& arch);
// The family of a config (its "arch"); `source` names the config's origin in errors.
const Family& family_of_config(const nlohmann::json& config, const std::string& source);
// "name  family  help" lines: `stretch train --arch help`, `stretch info --archs`.
std::string arch_table();

nlohmann::json resolve_config(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample);
nlohmann::json apply_overrides(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse use,
                               const std::string& source);
std::string structural_differences(const nlohmann::json& saved, const nlohmann::json& wanted);
// The model keys of a flat config (a checkpoint's config mixes model and training keys).
nlohmann::json model_keys(const nlohmann::json& flat_config, const std::string& source);
std::vector<FieldSpec> model_fields();
std::unique_ptr<LanguageModel> build_model(const nlohmann::json& config);
// The usage errors build_model() would raise for the config's values, without building.
void validate_config(const nlohmann::json& config);

}  // namespace stretch::models
