// train/trainer.h — `stretch train`: the fairseq training loop.
// Contract (REFERENCE.md §3): per update, the SUMMED loss of --update-freq batches is
// backpropagated, gradients are all-reduced over the MPI world and multiplied by
// world_size / total non-pad targets, clipped (--clip-norm), the optimizer steps with lr(u−1),
// num_updates += 1. A non-finite loss or gradient skips the update with a warning; after
// --max-consecutive-nan skips in a row training stops with an error. Validation and
// checkpoints follow fairseq's flags. SIGINT/SIGTERM: finish the current update, save
// checkpoint_last, exit with 128+signal. Resuming from checkpoint_last continues exactly
// (same later losses bit for bit on the same thread count).
#pragma once
#include "train/train_config.h"

namespace stretch::train {

// Runs training to completion; returns the process exit code.
int run_training(TrainConfig config);

}  // namespace stretch::train
