// models/model_file.cpp — see model_file.h.
#include "models/model_file.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "models/fairseq/fairseq_import.h"
#include "models/layers_to_keep.h"
#include "tensor/torch_file.h"

namespace stretch::models {
namespace {

bool is_training_state(const std::string& name) {
  return name.rfind("optimizer.", 0) == 0 || name.rfind("segment.", 0) == 0 || name.rfind("ema.", 0) == 0;
}

// --model-overrides "{'use_ema': True}": each weight replaced by its "ema.<name>" average (train/ema.h).
void use_ema_weights(ModelFile& m, const std::string& path) {
  std::map<std::string, Tensor> averages;
  for (const auto& [name, t] : m.file.tensors)
    if (name.rfind("ema.", 0) == 0) averages.emplace(name.substr(4), t);
  if (averages.empty())
    fail_input(path, "holds no moving average of the weights (no ema.* tensors)",
               "use_ema needs a checkpoint written by `stretch train --store-ema`; leave the override out to "
               "evaluate the weights");
  for (auto& [name, t] : m.file.tensors) {
    if (is_training_state(name)) continue;
    auto it = averages.find(name);
    if (it == averages.end())
      fail_input(path, "has no average for tensor '" + name + "'", "the file is damaged; restore an earlier checkpoint");
    t = it->second;
  }
  log_info(path + ": evaluating the moving average of the weights (--store-ema), not the weights");
}

// A PyTorch/fairseq .pt: imported in memory (models/fairseq), with one line saying so.
ModelFile read_fairseq_file(const std::string& path) {
  FairseqImport imp;
  try {
    imp = import_fairseq(path);
  } catch (const Error& e) {
    // "PATH: message\n  hint: hint" (core/error.h) → "PATH: is a PyTorch checkpoint (KIND) ...: message".
    std::string message = e.message();
    if (message.rfind(path + ": ", 0) == 0) message = message.substr(path.size() + 2);
    throw Error(e.kind(), path + ": is a PyTorch checkpoint (" + torch_file_kind(path) +
                              ") that stretch cannot import: " + message, e.hint());
  }
  log_info(path + " is a fairseq checkpoint: converted in memory (" + imp.notes.front() +
           "); `stretch import-fairseq` converts it once");
  for (size_t k = 1; k < imp.notes.size(); ++k)
    if (imp.notes[k].rfind("config from", 0) != 0) log_warning(path + ": " + imp.notes[k]);
  if (const std::string kept = ema_kept_note(imp.tensors); !kept.empty()) log_info(path + ": " + kept);
  ModelFile m;
  m.format = kFairseqFormat;
  m.config = imp.config;
  m.model = model_keys(m.config, path);
  m.file.path = path;
  m.file.tensors = std::move(imp.tensors);
  return m;  // dict_hash "": fairseq stores no dictionary; callers check the vocabulary size
}

}  // namespace

void write_model_file(const std::string& path, const LanguageModel& model, const ModelFileWrite& w) {
  NamedTensors tensors;
  for (const auto& [name, var] : model.params().items()) tensors.emplace_back(name, var.value());
  for (const auto& t : w.extra_tensors) tensors.push_back(t);
  SafetensorsMetadata meta = w.extra_meta;
  meta["format"] = w.format;
  // fairseq argument names at the top level (the model's), the trainer's groups beside them.
  nlohmann::json cfg = w.config.is_object() ? w.config : nlohmann::json::object();
  cfg.erase("model");
  const nlohmann::json model_json = model.config_json();
  for (auto& [key, value] : model_json.items()) cfg[key] = value;
  meta["config"] = cfg.dump();
  meta["dict_hash"] = w.dict_hash;
  if (!w.dictionary.empty()) meta["dictionary"] = w.dictionary;
  save_safetensors(path, tensors, meta);
}

ModelFile read_model_file(const std::string& path) {
  if (!std::filesystem::exists(path))
    fail_input(path, "checkpoint not found", "check --path / --save-dir; stretch writes checkpoint_last.pt and checkpoint_best.pt");
  if (looks_like_torch_file(path)) return read_fairseq_file(path);
  ModelFile m;
  m.file = load_safetensors(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = m.file.metadata.find(key);
    if (it == m.file.metadata.end())
      fail_input(path, std::string("not a stretch checkpoint (no '") + key + "' in the safetensors metadata)",
                 "stretch reads checkpoints written by `stretch train`; fairseq's pickled .pt files are not read");
    return it->second;
  };
  m.format = meta("format");
  if (m.format != kModelFileFormat && m.format != kCheckpointFormat)
    fail_input(path, "unsupported checkpoint format '" + m.format + "'",
               std::string("this build reads ") + kCheckpointFormat + " and " + kModelFileFormat);
  try {
    m.config = nlohmann::json::parse(meta("config"));
  } catch (const nlohmann::json::exception& e) {
    fail_input(path, std::string("corrupt checkpoint metadata: ") + e.what(), "restore an earlier checkpoint");
  }
  m.model = model_keys(m.config, path);
  m.dict_hash = meta("dict_hash");
  if (auto it = m.file.metadata.find("dictionary"); it != m.file.metadata.end()) m.dictionary = it->second;
  return m;
}

void load_weights(LanguageModel& model, const ModelFile& m) {
  const std::string& path = m.path().empty() ? std::string("checkpoint") : m.path();
  const std::string hint = "the checkpoint was written for another architecture: check --arch/--pos and the model "
                           "flags against its config (`stretch info CKPT`)";
  for (const auto& [name, var] : model.params().items()) {
    const Tensor* t = m.file.find(name);
    if (!t) fail_input(path, "has no tensor '" + name + "' (the model needs it)", hint);
    if (t->shape() != var.shape() || t->dtype() != DType::F32)
      fail_input(path, "tensor '" + name + "' is " + safetensors_dtype_name(t->dtype()) + " " + t->shape().str() +
                           ", the model expects F32 " + var.shape().str(), hint);
    var.value().copy_from(*t);
  }
  for (const auto& [name, t] : m.file.tensors)
    if (!is_training_state(name) && !model.params().contains(name))
      fail_input(path, "has tensor '" + name + "', which this model does not have", hint);
}

std::unique_ptr<LanguageModel> load_model(const std::string& path, const nlohmann::json& overrides, OverrideUse use,
                                          ModelFile* contents) {
  ModelFile m = read_model_file(path);
  std::unique_ptr<LanguageModel> model;
  nlohmann::json rest = overrides;
  // stretch's key: --store-ema's average as the weights (before any pruning renames them).
  if (rest.is_object() && rest.contains("use_ema")) {
    if (use != OverrideUse::Evaluation)
      fail_usage(path + ": use_ema evaluates a checkpoint's moving average (train --store-ema)",
                 "give it to eval-lm or generate (--model-overrides), not to train");
    if (!rest["use_ema"].is_boolean())
      fail_usage("--model-overrides: 'use_ema' is " + rest["use_ema"].dump() + ", not True or False",
                 "write {'use_ema': True}");
    if (rest["use_ema"].get<bool>()) use_ema_weights(m, path);
    rest.erase("use_ema");
  }
  if (rest.is_object() && rest.contains("decoder_layers_to_keep")) {  // fairseq's pruning at load (layers_to_keep.h)
    if (use != OverrideUse::Evaluation)
      fail_usage(path + ": decoder_layers_to_keep prunes a trained model for evaluation",
                 "give it to eval-lm or generate (--model-overrides), not to train");
    prune_decoder_layers(m, rest["decoder_layers_to_keep"]);
    rest.erase("decoder_layers_to_keep");
  }
  try {  // a bad value from the file's stored config or the overrides: name the file
    model = build_model(apply_overrides(m.model, rest, use, path));
  } catch (const Error& e) {
    // what() is the message, then "\n  hint: " + hint when there is one (core/error.h).
    static const std::string kHintPrefix = "\n  hint: ";
    std::string message = e.what();
    if (!e.hint().empty()) message.resize(message.size() - kHintPrefix.size() - e.hint().size());
    // The overrides' source is the path already (config_fields.h): name the file once.
    if (message.rfind(path + ": ", 0) != 0) message = path + ": " + message;
    throw Error(e.kind(), message, e.hint());
  }
  try {
    load_weights(*model, m);
  } catch (const Error& e) {
    fail_input(path, e.what());
  }
  if (contents) *contents = std::move(m);
  return model;
}

}  // namespace stretch::models

namespace stretch::models {
bool dictionary_matches(const ModelFile& m, const std::string& data_dict_hash) {
  return m.dict_hash.empty() || m.dict_hash == data_dict_hash;
}
}  // namespace stretch::models
