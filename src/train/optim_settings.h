// train/optim_settings.h — turns the trainer's flag values (OptimSettings, fairseq names) into
// the optim layer's typed optimizer and LR schedule.
#pragma once
#include <memory>

#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/train_config.h"

namespace stretch::train {
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimSettings& s);
std::unique_ptr<optim::LrSchedule> make_scheduler(const OptimSettings& s, int64_t max_update);
}  // namespace stretch::train
