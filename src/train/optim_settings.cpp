#include "train/optim_settings.h"

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
