// models/registry.cpp — the family list (one line per family) and the lookups of registry.h.
#include "models/registry.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "models/adaptive_span/family.h"
#include "models/roberta/family.h"
#include "models/transformer_lm/family.h"
#include "models/transformer_xl/family.h"

namespace stretch::models {

std::vector<const Family*> families() {
  static const std::vector<const Family*> list = {
      &transformer_lm_family(),
      &transformer_xl_family(),
      &adaptive_span_family(),
      &roberta_family(),
  };
  return list;
}

std::string arch_table() {
  std::string out;
  for (const Family* f : families())
    for (const auto& a : f->archs) {
      std::string name = a.name;
      name.resize(std::max<size_t>(name.size() + 2, 32), ' ');
      std::string fam = f->name;
      fam.resize(std::max<size_t>(fam.size() + 2, 18), ' ');
      out += name + fam + a.help + "\n";
    }
  return out;
}

const Family& family_of_arch(const std::string& arch) {
  std::string names;
  for (const Family* f : families())
    for (const auto& a : f->archs) {
      if (a.name == arch) return *f;
      names += (names.empty() ? "" : ", ") + a.name;
    }
  fail_usage("--arch: unknown architecture '" + arch + "'", "use one of " + names + " (`stretch train --arch help`)");
}

const Family& family_of_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object() || !config.contains("arch") || !config.at("arch").is_string())
    fail_input(source, "the model config has no \"arch\"", "it was not written by `stretch train`");
  const std::string arch = config.at("arch").get<std::string>();
  for (const Family* f : families())
    for (const auto& a : f->archs)
      if (a.name == arch) return *f;
  fail_input(source, "the model config names the unknown architecture '" + arch + "'",
             "this build knows: " + arch_table());
}

nlohmann::json resolve_config(const std::string& arch, const nlohmann::json& given, int64_t tokens_per_sample) {
  return family_of_arch(arch).resolve(arch, given, tokens_per_sample);
}

nlohmann::json apply_overrides(const nlohmann::json& config, const nlohmann::json& overrides, OverrideUse use,
                               const std::string& source) {
  const Family& f = family_of_config(config, source);
  nlohmann::json out = f.apply_overrides(config, overrides, use, source);
  if (use == OverrideUse::Evaluation) {
    // A trained model's architecture is its tensors and its function: an override that changes
    // a structural key (e.g. 'pos' on an ALiBi model, decoder_layers) would evaluate a model
    // nobody trained. Only the evaluation-time keys may change (docs/fairseq.md lists them).
    // A value no model can have is reported as such first (naming its flag and key).
    f.validate(out);
    std::string diffs = f.structural_differences(config, out);
    if (!diffs.empty()) {
      for (size_t p = diffs.find(" (this run: "); p != std::string::npos; p = diffs.find(" (this run: ", p))
        diffs.replace(p, 12, " (--model-overrides: ");
      std::string allowed = "max_tokens";
      for (const FieldSpec& s : f.fields)
        if (s.role != FieldRole::Structural || s.key == "max_target_positions") allowed += ", " + s.key;
      fail_usage(source + ": --model-overrides would change the architecture of the trained model: " + diffs,
                 "only evaluation-time keys may be overridden (" + allowed +
                     "); a different architecture needs a model trained with it");
    }
  }
  return out;
}

std::string structural_differences(const nlohmann::json& saved, const nlohmann::json& wanted) {
  const Family& a = family_of_config(saved, "the checkpoint");
  const Family& b = family_of_config(wanted, "this run");
  if (&a != &b) return "family " + a.name + " (this run: " + b.name + ")";
  return a.structural_differences(saved, wanted);
}

nlohmann::json model_keys(const nlohmann::json& flat, const std::string& source) {
  const Family& f = family_of_config(flat, source);
  nlohmann::json out = nlohmann::json::object();
  for (auto& [key, value] : flat.items())
    if (f.is_key(key)) out[key] = value;
  return out;
}

std::vector<FieldSpec> model_fields() {
  // A key two families share keeps the first family's flag and help; a choice accepts the values
  // of every family (each family's parser then refuses the ones it lacks, naming the flag).
  std::vector<FieldSpec> out;
  for (const Family* f : families())
    for (const auto& s : f->fields) {
      auto it = std::find_if(out.begin(), out.end(), [&](const FieldSpec& o) { return o.key == s.key; });
      if (it == out.end()) {
        out.push_back(s);
        continue;
      }
      for (const std::string& c : s.choices)
        if (std::find(it->choices.begin(), it->choices.end(), c) == it->choices.end()) it->choices.push_back(c);
    }
  return out;
}

std::unique_ptr<LanguageModel> build_model(const nlohmann::json& config) {
  return family_of_config(config, "model config").build(config);
}

}  // namespace stretch::models

namespace stretch::models {
void validate_config(const nlohmann::json& config) { family_of_config(config, "model config").validate(config); }
}  // namespace stretch::models
