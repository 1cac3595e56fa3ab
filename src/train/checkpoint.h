// train/checkpoint.h — stretch checkpoints: safetensors files (docs/formats.md) holding the
// model tensors under fairseq state-dict names, the optimizer state as tensors named
// "optimizer.<param>.<slot>", and in __metadata__: "format" ("stretch-checkpoint-1"),
// "config" (the whole effective config as JSON, fairseq argument names, model group under
// "model"), "dict_hash", "train_state" (train/train_state.h), "optimizer" (scalar state as
// JSON). Files keep fairseq's names (checkpoint_last.pt,
// checkpoint_best.pt, checkpointN.pt, checkpoint_E_U.pt) so fairseq commands run unchanged;
// their content is safetensors, which Python's safetensors.safe_open reads. Writes are atomic.
#pragma once
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/transformer_lm.h"
#include "tensor/safetensors.h"
#include "train/train_state.h"

namespace stretch::optim {
class Optimizer;
}

namespace stretch::train {

struct CheckpointContents {
  nlohmann::json config;         // effective config (train + model groups)
  models::TransformerLMConfig model;
  std::string dict_hash;
  TrainState state;
  nlohmann::json optimizer_scalars;
  SafetensorsFile file;          // all tensors (model + optimizer.*)
};

void save_checkpoint(const std::string& path, const models::TransformerLM& model, const nlohmann::json& config,
                     const std::string& dict_hash, const TrainState& state, const optim::Optimizer* optimizer);
// Reads and validates a checkpoint; errors name the file and say what to do.
CheckpointContents read_checkpoint(const std::string& path);
// Copies the checkpoint's tensors into `model`. A missing, extra (other than "optimizer.*") or
// mis-shaped tensor is an error naming the file and the tensor ("another architecture").
void load_model_weights(models::TransformerLM& model, const CheckpointContents& ckpt);
// Resuming: the checkpoint's model must have the run's structure (every key that changes a
// tensor or the function computed; dropout and evaluation-only keys may differ). Otherwise
// one error naming the file and each differing key with both values.
void check_same_architecture(const std::string& path, const models::TransformerLMConfig& saved,
                             const models::TransformerLMConfig& wanted);
// Builds a model from a checkpoint with --model-overrides applied (evaluation, generation).
std::unique_ptr<models::TransformerLM> load_model(const std::string& path, const nlohmann::json& overrides,
                                                  CheckpointContents* contents = nullptr);

}  // namespace stretch::train
