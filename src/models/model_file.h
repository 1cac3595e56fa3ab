// models/model_file.h — model files: what eval-lm, sweep and generate read (no training layer).
// Contract: a safetensors file (docs/formats.md) with the model's tensors under their parameter
// names and, in __metadata__: "format" ("stretch-model-1"; training checkpoints, which add
// optimizer, schedule, RNG, data position and segment state on top, say
// "stretch-checkpoint-1" and are model files too), "config" (JSON: the model's config with
// fairseq keys at the top level, "arch" included; a checkpoint adds the trainer's groups
// beside them), "dict_hash" and "dictionary" (the dict.txt text the model was trained with, so
// `stretch generate --path M` needs no data directory; files written before it was stored
// have no "dictionary" and still load). Tensors named "optimizer.*" and "segment.*" belong to
// the training state and are not weights. Writes are atomic (save_safetensors).
// A fairseq checkpoint (torch.save .pt, zip or legacy) given where a model file is read is
// imported in memory (models/fairseq/fairseq_import.h), with one log line saying so: its
// format is "fairseq" and its dict_hash is empty (fairseq stores no dictionary; callers then
// check the vocabulary size only, as fairseq does).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/language_model.h"
#include "models/registry.h"
#include "tensor/safetensors.h"

namespace stretch::models {

inline constexpr const char* kModelFileFormat = "stretch-model-1";
inline constexpr const char* kCheckpointFormat = "stretch-checkpoint-1";
inline constexpr const char* kFairseqFormat = "fairseq";  // imported in memory from a .pt

struct ModelFile {
  std::string format;
  nlohmann::json config;   // as stored (flat)
  nlohmann::json model;    // the model's keys of it (registry: model_keys)
  std::string dict_hash;
  std::string dictionary;  // dict.txt text; empty in files written before it was stored
  SafetensorsFile file;    // every tensor (weights and, in a checkpoint, training state)
  const std::string& path() const { return file.path; }
};

struct ModelFileWrite {
  nlohmann::json config = nlohmann::json::object();  // extra top-level groups (the trainer's)
  std::string dict_hash{};
  std::string dictionary{};
  const char* format = kModelFileFormat;
  NamedTensors extra_tensors{};      // training state tensors (optimizer.*, segment.*)
  SafetensorsMetadata extra_meta{};  // training state metadata
};

void write_model_file(const std::string& path, const LanguageModel& model, const ModelFileWrite& what);
// Reads and validates the metadata; errors name the file and say what to do (a PyTorch/fairseq
// .pt is recognised and named).
ModelFile read_model_file(const std::string& path);
// Copies the file's weights into `model`. A missing, extra (other than training state) or
// mis-shaped tensor is an error naming the file and the tensor ("another architecture").
void load_weights(LanguageModel& model, const ModelFile& file);
// True when the file's dictionary is the data's (or unknown: an imported fairseq file, or one
// imported without --dict).
bool dictionary_matches(const ModelFile& m, const std::string& data_dict_hash);
// Builds the model of a file with --model-overrides applied.
std::unique_ptr<LanguageModel> load_model(const std::string& path, const nlohmann::json& overrides, OverrideUse use,
                                          ModelFile* contents = nullptr);

}  // namespace stretch::models
