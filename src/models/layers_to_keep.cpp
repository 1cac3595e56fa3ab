// models/layers_to_keep.cpp — see layers_to_keep.h.
#include "models/layers_to_keep.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "models/config_fields.h"

namespace stretch::models {
namespace {

constexpr const char* kKey = "decoder_layers_to_keep";

// "0, 2" -> {0, 2}; each item as Python's int() reads it (surrounding spaces, an optional sign).
std::vector<int64_t> parse_layers(const std::string& text, int64_t layers, const std::string& where) {
  std::vector<int64_t> out;
  size_t from = 0;
  while (from <= text.size()) {
    const size_t comma = std::min(text.find(',', from), text.size());
    std::string item = text.substr(from, comma - from);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    const std::optional<int64_t> number = parse_integer(item);
    if (!number)
      fail_usage(where + ": " + kKey + " '" + text + "': '" + item + "' is not a layer number",
                 "give the layers to keep as comma-separated numbers, e.g. '0,2'");
    const int64_t k = *number;
    if (k < 0 || k >= layers)
      fail_usage(where + ": " + kKey + " '" + text + "': layer " + std::to_string(k) + " is not one of the model's " +
                     std::to_string(layers) + " (0.." + std::to_string(layers - 1) + ")",
                 "give layer numbers below decoder_layers");
    out.push_back(k);
    from = comma + 1;
  }
  const std::set<int64_t> distinct(out.begin(), out.end());
  if (distinct.size() != out.size())
    fail_usage(where + ": " + kKey + " '" + text + "' names a layer twice", "name each layer to keep once");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void prune_decoder_layers(ModelFile& m, const nlohmann::json& value) {
  const std::string where = m.path().empty() ? std::string("--model-overrides") : m.path();
  if (value.is_null() || (value.is_string() && value.get<std::string>().empty())) return;
  if (!value.is_string())
    fail_usage(where + ": " + kKey + " is " + value.dump() + ", not a string", "write it as fairseq does: '0,2'");
  if (!m.model.contains("decoder_layers") || !m.model["decoder_layers"].is_number_integer())
    fail_usage(where + ": " + kKey + " applies to the transformer_lm family (decoder.layers.K); this model has no "
                   "decoder_layers",
               "leave decoder_layers_to_keep out of --model-overrides for this model");
  for (const char* key : {"alibi_layer_scale", "alibi_no_bias_heads"})
    if (m.model.contains(key) && m.model[key].is_string() && !m.model[key].get<std::string>().empty())
      fail_usage(where + ": " + kKey + " cannot renumber the layers of a model with " + key + " " + m.model[key].dump() +
                     " (it names layers by number)",
                 "evaluate the model whole");
  if (m.model.contains("pos_upper") && m.model["pos_upper"] != "same")
    fail_usage(where + ": " + kKey + " cannot renumber the layers of a hybrid model (pos_upper " +
                   m.model["pos_upper"].dump() + " from layer " + m.model.value("pos_upper_from_layer", nlohmann::json()).dump() + ")",
               "evaluate the model whole");
  const int64_t layers = m.model["decoder_layers"].get<int64_t>();
  const std::vector<int64_t> keep = parse_layers(value.get<std::string>(), layers, where);
  std::map<std::string, std::string> renumber;  // old index -> new index, as fairseq's mapping_dict
  for (size_t i = 0; i < keep.size(); ++i) renumber[std::to_string(keep[i])] = std::to_string(i);
  // fairseq: a tensor with ".layers.K." is a layer's; it survives when K is kept and its name matches
  // ^decoder.*\.layers\.(\d+) (the number replaced there).
  static const std::regex any_layer(R"(\.layers\.(\d+)\.)");
  static const std::regex decoder_layer(R"(^decoder.*\.layers\.(\d+))");
  NamedTensors kept;
  for (auto& [name, t] : m.file.tensors) {
    std::smatch any, dec;
    if (!std::regex_search(name, any, any_layer)) {
      kept.emplace_back(name, std::move(t));
      continue;
    }
    auto it = renumber.find(any[1].str());
    if (it == renumber.end() || !std::regex_search(name, dec, decoder_layer)) continue;
    kept.emplace_back(name.substr(0, dec.position(1)) + it->second + name.substr(dec.position(1) + dec.length(1)),
                      std::move(t));
  }
  m.file.tensors = std::move(kept);
  m.model["decoder_layers"] = static_cast<int64_t>(keep.size());
  log_info("Pruning model to specified layer configuration - this works best if the model was trained with "
           "LayerDrop (decoder_layers_to_keep '" + value.get<std::string>() + "': " + std::to_string(keep.size()) +
           " of " + std::to_string(layers) + " layers)");
}

}  // namespace stretch::models
