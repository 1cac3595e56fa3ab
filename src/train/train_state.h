// train/train_state.h — where a training run stands: everything besides the weights and the
// optimizer state that a resumed run needs to continue exactly (stored in a checkpoint's
// __metadata__["train_state"], docs/formats.md "Checkpoint contents").
// Nothing random is stored: dropout masks are a function of (seed, update, micro-batch, layer,
// site) and each epoch's batch order of (seed, epoch), so (num_updates, epoch, next_batch)
// fix every later random draw; the learning rate is recomputed from num_updates (and epoch), and
// for reduce_lr_on_plateau from lr_plateau, the only schedule state kept (optim/lr_scheduler.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "optim/lr_scheduler.h"

namespace stretch::train {

struct TrainState {
  int64_t num_updates = 0;       // updates applied so far
  int64_t epoch = 1;             // 1-based epoch in progress
  int64_t next_batch = 0;        // index (in this epoch's shuffled order) of the next batch to train on
  double best_loss = NAN;        // best validation loss (base 2) so far; NaN: none yet
  double epoch_loss_sum = 0;     // Σ NLL (nats) of this epoch's applied updates: the epoch's "train" log line
  double epoch_ntokens = 0;      // Σ non-pad targets of those updates
  double epoch_nsentences = 0;   // Σ blocks (bsz), Σ gradient norms, clipped updates and updates of the
  double epoch_gnorm_sum = 0;    // epoch, for the rest of fairseq's end-of-epoch line (absent in files
  double epoch_clip_count = 0;   // written before them: read as 0)
  int64_t epoch_updates = 0;
  // Σ over the epoch's updates of the family's train_metrics() (Adaptive Span's avg_span, max_span),
  // in its order: the end-of-epoch line's train_avg_span / train_max_span.
  std::vector<std::pair<std::string, double>> epoch_metric_sums{};
  uint64_t seed = 1;             // --seed the run started with (a resume with another seed is refused)
  optim::PlateauState lr_plateau{};  // --lr-scheduler reduce_lr_on_plateau's state (absent in older files: fresh)
  // --store-ema --ema-update-freq N: updates since the average last moved (train/ema.h). fairseq keeps
  // it in memory only (a resume restarts it at 0); kept here so a resume continues exactly.
  int64_t ema_update_counter = 0;
  // --bf16: how the run computes its bf16 products ("native" / "fp32" / "native-fp32-attention",
  // ops::bf16_products_name; "" for an fp32 run). Where the CPU's choice is measured at startup
  // (cli/bf16_speed.h, kind Dot or Amx) a resume keeps
  // the checkpoint's, so a noisy measurement cannot switch a run's arithmetic halfway.
  std::string bf16_products{};
  // Moves to the start of the next epoch (batch 0, epoch sums cleared).
  void begin_next_epoch();
  nlohmann::json to_json() const;
  // Errors name `source` (the checkpoint path) and the bad key.
  static TrainState from_json(const nlohmann::json& j, const std::string& source);
};

// Time spent so far, which an uninterrupted run and a resumed one do not share bit for bit, so it
// is kept out of train_state (whose equality the resume tests check) in its own metadata key
// "train_clock". fairseq keeps these in its checkpoint's meters: train_wall continues across a resume.
struct TrainClock {
  double train_wall = 0;        // seconds inside updates over the whole run (fairseq's cumulative_training_time)
  double epoch_train_wall = 0;  // the same within the epoch in progress (the "train" line's train_wall)
  double epoch_elapsed = 0;     // wall seconds of the epoch in progress (its wps and ups)
  nlohmann::json to_json() const;
  static TrainClock from_json(const nlohmann::json& j);  // missing keys: 0
};

}  // namespace stretch::train
