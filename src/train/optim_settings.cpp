#include "train/optim_settings.h"

#include <tuple>

namespace stretch::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimSettings& s) {
  optim::OptimizerConfig c;
  c.kind = s.optimizer;
  if (c.kind == optim::OptimizerKind::Nag || c.kind == optim::OptimizerKind::Sgd) {
    // fairseq's nag defaults to 0.99; sgd to 0 (the flag's own default here is nag's).
    c.momentum = (c.kind == optim::OptimizerKind::Sgd && s.momentum == 0.99) ? 0.0 : s.momentum;
  }
  c.weight_decay = s.weight_decay;
  auto [b1, b2] = optim::parse_adam_betas(s.adam_betas);
  c.beta1 = b1;
  c.beta2 = b2;
  if (c.kind == optim::OptimizerKind::Adam || c.kind == optim::OptimizerKind::AdamW) c.eps = s.adam_eps;
  c.adagrad_clip = s.adagrad_clip;
  if (c.kind == optim::OptimizerKind::Adafactor) {
    std::tie(c.adafactor_eps1, c.adafactor_eps2) = optim::parse_adafactor_eps(s.adafactor_eps);
    c.clip_threshold = s.clip_threshold;
    c.decay_rate = s.decay_rate;
    c.adafactor_beta1 = s.beta1;
    c.scale_parameter = s.scale_parameter;
    c.relative_step = s.relative_step;
    c.warmup_init = s.warmup_init;
    // fairseq's Adafactor raises "Cannot combine manual lr and relative_step options" whenever lr
    // is set, and fairseq-train always sets it (--lr defaults to 0.25), so fairseq-train refuses
    // --relative-step altogether. stretch runs it (the lr comes from the step count) but refuses
    // lr flags that would be ignored.
    if (s.relative_step && (s.lr != OptimSettings{}.lr || s.lr_scheduler != optim::SchedulerKind::Fixed ||
                            s.warmup_updates != 0))
      fail_usage("--relative-step: the lr is min(1e-2, 1/sqrt(t)) from the step count (min(1e-6*t, 1/sqrt(t)) with "
                 "--warmup-init), so --lr, --lr-scheduler and "
                 "--warmup-updates would be ignored (fairseq: \"Cannot combine manual lr and relative_step options\")",
                 "drop --lr/--lr-scheduler/--warmup-updates, or drop --relative-step to use the schedule's lr");
    // fairseq's schedules set the optimizer's lr after every update, all but
    // reduce_lr_on_plateau after its warmup: there fairseq's Adafactor (without --relative-step)
    // keeps multiplying --scale-parameter's scales into the lr from update to update.
    if (s.scale_parameter && !s.relative_step && s.lr_scheduler == optim::SchedulerKind::ReduceLrOnPlateau)
      fail_usage("--optimizer adafactor --scale-parameter with --lr-scheduler reduce_lr_on_plateau is not supported "
                 "(fairseq 0.12.2 multiplies the parameter scales into the lr across updates there)",
                 "use another --lr-scheduler (fixed, inverse_sqrt, ...), or add --relative-step, or drop --scale-parameter");
  } else {
    // fairseq registers these flags only with --optimizer adafactor (elsewhere: unrecognized arguments).
    const OptimSettings d;
    const char* flag = s.scale_parameter                  ? "--scale-parameter"
                       : s.relative_step                  ? "--relative-step"
                       : s.warmup_init                    ? "--warmup-init"
                       : s.beta1                          ? "--beta1"
                       : s.clip_threshold != d.clip_threshold ? "--clip-threshold"
                       : s.decay_rate != d.decay_rate     ? "--decay-rate"
                       : s.adafactor_eps != d.adafactor_eps ? "--adafactor-eps"
                                                          : nullptr;
    if (flag)
      fail_usage(std::string(flag) + " is an --optimizer adafactor flag, but the optimizer is " +
                     optim::optimizer_kind_name(c.kind),
                 "add --optimizer adafactor, or drop " + std::string(flag));
  }
  return optim::make_optimizer(c);
}

namespace {
optim::SchedulerConfig scheduler_config(const OptimSettings& s, int64_t max_update) {
  optim::SchedulerConfig c;
  c.kind = s.lr_scheduler;
  c.lr = s.lr;
  if (s.warmup_updates > 0 || c.kind != optim::SchedulerKind::InverseSqrt) c.warmup_updates = s.warmup_updates;
  c.warmup_init_lr = s.warmup_init_lr;
  c.min_lr = s.min_lr;
  c.max_update = max_update;
  c.t_mult = s.t_mult;
  c.lr_period_updates = static_cast<double>(s.lr_period_updates);
  c.lr_shrink = s.lr_shrink;
  if (s.force_anneal > 0) c.force_anneal = s.force_anneal;
  c.end_learning_rate = s.end_learning_rate;
  c.power = s.power;
  c.warmup_steps = s.warmup_steps;
  c.hold_steps = s.hold_steps;
  c.decay_steps = s.decay_steps;
  if (!s.phase_ratio.empty()) c.phase_ratio = optim::parse_phase_ratio(s.phase_ratio);
  c.init_lr_scale = s.init_lr_scale;
  c.final_lr_scale = s.final_lr_scale;
  c.max_lr = s.max_lr;
  c.shrink_min = s.shrink_min;
  c.lr_deacy_period = s.lr_deacy_period;
  c.lr_decay = s.lr_decay;
  c.lr_threshold = s.lr_threshold;
  c.lr_patience = s.lr_patience;
  c.total_num_update = s.total_num_update > 0 ? s.total_num_update : (max_update > 0 ? max_update : 1000000);
  return c;
}
}  // namespace

std::unique_ptr<optim::LrSchedule> make_scheduler(const OptimSettings& s, int64_t max_update) {
  return std::make_unique<optim::LrSchedule>(scheduler_config(s, max_update));
}

std::unique_ptr<optim::LrSchedule> make_scheduler(const TrainConfig& tc) {
  optim::SchedulerConfig c = scheduler_config(tc.optim, tc.max_update);
  c.maximize = tc.maximize_best_checkpoint_metric;
  return std::make_unique<optim::LrSchedule>(c);
}

}  // namespace stretch::train
