// models/apply_model_config.h — one way every family applies a whole model config (a checkpoint's,
// or --model-overrides) to its struct, over the family's field table (models/config_fields.h).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "models/config_fields.h"

namespace stretch::models::fields {

// A whole model config (a checkpoint's, or --model-overrides) applied to c, for every family: the
// keys the ALiBi fork stores to size buffers (max_tokens, max_sentences, batch_size) are said once
// and skipped; any other key the table lacks is one usage error, `source + ": " + unknown(key)`
// with `hint` (the family's wording); nothing is set unless every key is known.
template <class C>
void apply_model_config(const std::vector<Field<C>>& table, C& c, const nlohmann::json& j, const std::string& source,
                        const std::function<std::string(const std::string&)>& unknown, const std::string& hint) {
  if (!j.is_object()) fail_usage(source + ": the model config must be an object, got " + j.dump());
  nlohmann::json known = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "max_tokens" || it.key() == "max_sentences" || it.key() == "batch_size") {
      log_once(LogLevel::Info, "model override '" + it.key() + "' has no effect in stretch (buffers are sized per call)");
      continue;
    }
    if (!find(table, it.key())) fail_usage(source + ": " + unknown(it.key()), hint);
    known[it.key()] = it.value();
  }
  apply(table, c, known, source);
}

}  // namespace stretch::models::fields
