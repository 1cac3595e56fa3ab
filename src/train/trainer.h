// train/trainer.h — `stretch train`: the fairseq training loop.
// Contract (REFERENCE.md §3): each update is train_update() (train/update.h: summed loss of
// --update-freq batches, all-reduce, × 1/ntokens, --clip-norm, optimizer step with lr(u−1)).
// A non-finite loss or gradient skips the update with a warning (the batches are consumed);
// after --max-consecutive-nan skips in a row training stops with an error (exit 1) and writes
// nothing, so the checkpoints already on disk stay as they were. Validation and checkpoint
// names follow fairseq's validate_and_save / save_checkpoint (--save-interval-updates,
// --validate-interval-updates, epochs, checkpoint_best by validation loss, retention).
// SIGINT/SIGTERM: finish the current update, save checkpoint_last, exit with 128+signal (a
// second signal exits at once). A run resumes from --save-dir/checkpoint_last.pt when it exists
// (or from --restore-file) and then continues exactly: the same later losses bit for bit on
// the same --threads, whether it was stopped by a signal or killed (kill -9: from the last
// checkpoint written). JSON log lines (--log-format json) carry fairseq's field names.
#pragma once
#include "train/train_config.h"

namespace stretch::train {

// Runs training to completion; returns the process exit code.
int run_training(TrainConfig config);

}  // namespace stretch::train
