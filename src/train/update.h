// train/update.h — ONE optimizer update exactly as fairseq's train_step does it
// (REFERENCE.md §3.2). The trainer (train/trainer.cpp) and the trajectory parity driver
// (tools/parity_dump.cpp --trajectory) both call train_update(); there is no second copy.
//
// For the micro-batches of one update (--update-freq of them, this rank's share):
//   1. zero the gradients; for each micro-batch i: features in training mode (dropout stream
//      (seed, update = num_updates, micro = i); the family's training segment state, if any),
//      the head's loss (SUMMED NLL over non-pad targets for cross_entropy) plus the family's
//      aux_loss, backward (gradients accumulate); loss_sum is the heads' losses only (the aux
//      term is in the gradient, not in the logged loss, as fairseq's adaptive_span_loss logs it);
//   2. all-reduce the gradients and (loss, sample size, ntokens, nsentences) over the world (sums);
//      with UpdateParams::buckets (--ddp-backend pytorch_ddp/c10d, world > 1) the gradients are
//      summed in buckets started during the LAST micro-batch's backward as soon as autograd says
//      each bucket's gradients are final (autograd/grad_ready.h, dist/bucket_allreduce.h), and
//      waited for here; without (legacy_ddp/no_c10d) one all-reduce per parameter after backward;
//   3. a non-finite loss or gradient: nothing else happens (parameters, optimizer state and
//      num_updates unchanged), the result says applied = false and the caller warns / stops;
//   4. gradients ×= 1 / sample_size (the head's, summed over all ranks and micro-batches: the
//      non-pad targets for cross_entropy; a batch's own LmBatch::sample_size where the task fixes
//      it: B·T for truncated_bptt_lm, fairseq's sample["ntokens"]);
//   5. gnorm = global L2 norm; with clip_norm > 0, gradients ×= min(1, clip / (gnorm + 1e-6));
//   6. optimizer step with lr = schedule.lr_at_epoch(num_updates, epoch) (update u uses lr(u−1));
//   7. the family's after_step() hook; num_updates += 1 (the schedule is a pure function: the
//      next lr is lr_at(num_updates)).
#pragma once
#include <cstdint>
#include <span>

#include "dist/bucket_allreduce.h"
#include "dist/world.h"
#include "models/language_model.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/lm_data.h"
#include "train/train_state.h"

namespace stretch::train {

struct UpdateParams {
  double clip_norm = 0.0;  // --clip-norm (0: no clipping)
  uint64_t seed = 1;       // --seed: dropout masks
  int32_t pad = 1;         // padding index: targets equal to it are not scored
  bool sentence_avg = false;  // --sentence-avg: sample size = rows (fairseq's target.size(0)), not the targets
  // --checkpoint-activations: the blocks recompute their activations in backward (the same
  // gradients, bit for bit; models::ForwardOptions::activations).
  autograd::Activations activations = autograd::Activations::Keep;
  // Bucketed all-reduce overlapped with backward, built on grad_slices(model) (nullptr: the
  // per-parameter all-reduce after backward; a no-op in a world of size 1 either way).
  dist::BucketAllreduce* buckets = nullptr;
};

enum class UpdateOutcome : uint8_t { Applied, SkippedNonFinite };

struct UpdateResult {
  UpdateOutcome outcome = UpdateOutcome::Applied;
  double loss_sum = 0.0;    // Σ NLL (nats) over the update's non-pad targets, all ranks
  double ntokens = 0.0;     // non-pad targets, all ranks
  double sample_size = 0.0; // the gradient's divisor, all ranks
  double nsentences = 0.0;  // rows (blocks), all ranks
  double gnorm = 0.0;       // norm of the normalised gradient before clipping (NaN when skipped)
  double lr = 0.0;          // the rate this update used (or would have used)
  bool applied() const { return outcome == UpdateOutcome::Applied; }
};

// The optimizer's view of the model's parameters (a tied parameter appears once).
std::vector<optim::OptimParam> optim_params(models::LanguageModel& model);
// The same parameters' gradient buffers (allocated here if need be), for dist::BucketAllreduce.
std::vector<dist::GradSlice> grad_slices(models::LanguageModel& model);

// One update on `group` (the micro-batches; an undefined src is an empty fill batch of this
// rank and contributes nothing). Advances state.num_updates when applied. `segment`: the
// family's training memory (nullptr when it has none).
UpdateResult train_update(models::LanguageModel& model, std::span<const LmBatch> group, optim::Optimizer& optimizer,
                          const optim::LrSchedule& schedule, TrainState& state, const UpdateParams& params,
                          const dist::World& world, models::SegmentState* segment = nullptr);

}  // namespace stretch::train
