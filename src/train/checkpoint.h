// train/checkpoint.h — training checkpoints: a model file (models/model_file.h: weights,
// config, dictionary) plus the training state — the optimizer state as tensors named
// "optimizer.<param>.<slot>", the family's segment state as "segment.<name>", and in
// __metadata__: "format" ("stretch-checkpoint-1"), "train_state" (train/train_state.h),
// "train_clock" (time spent, train/train_state.h) and "optimizer" (scalar state as JSON); "config" holds the whole effective config (model keys at
// the top level, the trainer's groups beside them). Files keep fairseq's names
// (checkpoint_last.pt, checkpoint_best.pt, checkpointN.pt, checkpoint_E_U.pt) so fairseq commands
// run unchanged; their content is safetensors, which Python's safetensors.safe_open reads.
// Writes are atomic.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_file.h"
#include "train/train_state.h"

namespace stretch::optim {
class Optimizer;
}

namespace stretch::train {

struct CheckpointContents : models::ModelFile {
  TrainState state;
  TrainClock clock;  // "train_clock" (absent in older files: zeros)
  nlohmann::json optimizer_scalars;  // null: saved without the optimizer state (--no-save-optimizer-state)
};

struct CheckpointSave {
  nlohmann::json config = nlohmann::json::object();  // effective config (train + model groups)
  std::string dict_hash{};
  std::string dictionary{};                          // dict.txt text
  TrainState state{};
  TrainClock clock{};
  const optim::Optimizer* optimizer = nullptr;       // null: no optimizer state ("optimizer": null)
  const models::SegmentState* segment = nullptr;     // the family's training memory, if any
  NamedTensors ema{};                                // --store-ema: "ema.<parameter>" tensors (train/ema.h)
};

void save_checkpoint(const std::string& path, const models::LanguageModel& model, const CheckpointSave& what);
// Reads and validates a checkpoint with training state; errors name the file and say what to do.
CheckpointContents read_checkpoint(const std::string& path);
// The segment state tensors (names without "segment.").
NamedTensors segment_tensors(const CheckpointContents& ckpt);
// Resuming: the checkpoint's model must have the run's structure (every key that changes a
// tensor or the function computed; dropout and evaluation-only keys may differ). Otherwise
// one error naming the file and each differing key with both values.
void check_same_architecture(const std::string& path, const nlohmann::json& saved, const nlohmann::json& wanted);

}  // namespace stretch::train
