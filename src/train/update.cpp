// train/update.cpp — fairseq's train_step (REFERENCE §3.2); the contract is in update.h.
#include "train/update.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "autograd/functions.h"
#include "autograd/grad_ready.h"
#include "autograd/tape.h"
#include "optim/grad_clip.h"

namespace stretch::train {

std::vector<optim::OptimParam> optim_params(models::LanguageModel& model) {
  std::vector<optim::OptimParam> out;
  for (const auto& [name, var] : model.params().items())
    out.push_back({name, var.data(), var.grad_data(), var.numel(), var.shape().dims()});
  return out;
}

std::vector<dist::GradSlice> grad_slices(models::LanguageModel& model) {
  std::vector<dist::GradSlice> out;
  for (const auto& p : optim_params(model)) out.push_back({.grad = p.grad, .numel = p.numel});
  return out;
}

UpdateResult train_update(models::LanguageModel& model, std::span<const LmBatch> group, optim::Optimizer& optimizer,
                          const optim::LrSchedule& schedule, TrainState& state, const UpdateParams& params,
                          const dist::World& world, models::SegmentState* segment) {
  UpdateResult r;
  r.lr = schedule.lr_at_epoch(state.num_updates, state.epoch);
  model.params().zero_grad();
  double sums[4] = {0, 0, 0, 0};  // loss (nats), ntokens, sentences, sample size
  // Overlap: the last micro-batch with data is watched; each parameter whose gradient is final
  // goes to its bucket, and buckets start in order (every rank the same).
  dist::BucketAllreduce* buckets = world.size() > 1 ? params.buckets : nullptr;
  std::vector<dist::GradSlice> slices;
  size_t last = group.size();
  if (buckets) {
    slices = grad_slices(model);
    STRETCH_CHECK(slices.size() == buckets->params().size(),
                  "train_update: the bucketed all-reduce was built for another parameter list");
    for (size_t k = 0; k < slices.size(); ++k)
      STRETCH_CHECK(slices[k].grad == buckets->params()[k].grad && slices[k].numel == buckets->params()[k].numel,
                    "train_update: parameter " << k << "'s gradient buffer moved since the bucketed all-reduce was built");
    buckets->begin();
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i].src.defined()) last = i;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    const LmBatch& b = group[i];
    if (!b.src.defined()) continue;
    std::optional<autograd::GradReady> ready;
    std::optional<autograd::GradWatchScope> watch;
    if (i == last) {
      std::vector<autograd::LeafGrad> leaves;
      for (const auto& sl : slices) leaves.push_back({.grad = sl.grad, .numel = sl.numel});
      ready.emplace(std::move(leaves), [buckets](size_t p) { buckets->ready(p); }, [buckets] { buckets->poll(); });
      watch.emplace(&*ready);
    }
    autograd::Var hidden = model.features(b.src, {.mode = models::Mode::Train,
                                                  .seed = params.seed,
                                                  .step = static_cast<uint64_t>(state.num_updates),
                                                  .micro = static_cast<uint64_t>(i),
                                                  .state = segment,
                                                  .activations = params.activations});
    nn::HeadLoss head = model.head().loss(hidden, b.tgt, params.pad, nn::LossUse::Training);
    autograd::Var loss = head.loss;
    if (autograd::Var aux = model.aux_loss(); aux.defined()) loss = autograd::add(loss, aux);
    autograd::tape().backward(loss);
    sums[0] += head.loss.value().f32()[0];  // the logged loss: the head's, without the aux term
    sums[1] += static_cast<double>(b.ntokens);
    sums[2] += static_cast<double>(b.src.dim(0));
    // fairseq's cross_entropy/adaptive_loss: sample_size = target.size(0) with --sentence-avg.
    sums[3] += params.sentence_avg ? static_cast<double>(b.src.dim(0))
               : b.sample_size > 0 ? static_cast<double>(b.sample_size)
                                   : head.sample_size;
  }
  const auto ps = optim_params(model);
  const std::vector<std::string> unused = model.take_unused_params();  // taken even when the step is skipped
  if (buckets)
    buckets->finish();
  else
    for (const auto& p : ps) world.allreduce_sum(p.grad, p.numel);  // no-op in a world of size 1
  world.allreduce_sum(sums, 4);
  r.loss_sum = sums[0];
  r.ntokens = sums[1];
  r.nsentences = sums[2];
  r.sample_size = sums[3];
  // grads / ntokens and clipping: the norm's pass (it also finds non-finite grads), then the
  // multiply folded into the optimizer's update pass (bitwise multiply_grads, then step).
  optim::GradScale scale;
  if (std::isfinite(r.loss_sum))
    scale = optim::scale_and_clip_factor(ps, 1.0 / std::max(r.sample_size, 1.0), params.clip_norm);
  else
    scale.norm = NAN;
  r.gnorm = scale.norm;
  if (!std::isfinite(r.gnorm)) {
    r.outcome = UpdateOutcome::SkippedNonFinite;
    r.gnorm = NAN;
    return r;
  }
  // LayerDrop's skipped blocks: one process leaves them out of the step, as fairseq's optimizers skip
  // a parameter whose .grad is None (no moment decay, no step count); several processes step them
  // with their all-reduced zeros, as fairseq's DDP zero-fills a missing gradient.
  if (!unused.empty() && world.size() == 1) {
    const std::set<std::string> skip(unused.begin(), unused.end());
    std::vector<optim::OptimParam> stepped;
    for (const auto& p : ps)
      if (!skip.count(p.name)) stepped.push_back(p);
    optimizer.step(stepped, r.lr, scale.factor);
  } else {
    optimizer.step(ps, r.lr, scale.factor);
  }
  model.after_step();
  state.num_updates += 1;
  return r;
}

}  // namespace stretch::train
