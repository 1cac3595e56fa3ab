// train/train_state.h — where a training run stands: everything besides the weights and the
// optimizer state that a resumed run needs to continue exactly (stored in a checkpoint's
// __metadata__["train_state"], docs/formats.md "Checkpoint contents").
// Nothing random is stored: dropout masks are a function of (seed, update, micro-batch, layer,
// site) and each epoch's batch order of (seed, epoch), so (num_updates, epoch, next_batch)
// fix every later random draw; the learning rate is recomputed from num_updates (and epoch).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace stretch::train {

struct TrainState {
  int64_t num_updates = 0;       // updates applied so far
  int64_t epoch = 1;             // 1-based epoch in progress
  int64_t next_batch = 0;        // index (in this epoch's shuffled order) of the next batch to train on
  double best_loss = NAN;        // best validation loss (base 2) so far; NaN: none yet
  double epoch_loss_sum = 0;     // Σ NLL (nats) of this epoch's applied updates: the epoch's "train" log line
  double epoch_ntokens = 0;      // Σ non-pad targets of those updates
  uint64_t seed = 1;             // --seed the run started with (a resume with another seed is refused)
  nlohmann::json to_json() const;
  // Errors name `source` (the checkpoint path) and the bad key.
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace stretch::train
