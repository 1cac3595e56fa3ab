// train/optim_settings.h — turns the trainer's flag values (OptimSettings, fairseq names) into
// the optim layer's typed optimizer and LR schedule.
#pragma once
#include <memory>

#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/train_config.h"

namespace stretch::train {
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimSettings& s);
// The schedule of the flags (reduce_lr_on_plateau in mode min) ...
std::unique_ptr<optim::LrSchedule> make_scheduler(const OptimSettings& s, int64_t max_update);
// ... and of a run (--max-update; --maximize-best-checkpoint-metric sets reduce_lr_on_plateau's mode).
std::unique_ptr<optim::LrSchedule> make_scheduler(const TrainConfig& c);
}  // namespace stretch::train
