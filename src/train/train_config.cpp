#include "train/train_config.h"

#include "train/lm_data.h"

namespace stretch::train {

const char* log_format_name(LogFormat f) {
  switch (f) {
    case LogFormat::Simple: return "simple";
    case LogFormat::Json: return "json";
    case LogFormat::None: return "none";
    case LogFormat::Tqdm: return "tqdm";
  }
  return "?";
}

nlohmann::json TrainConfig::to_json() const {
  const auto& o = optim;
  nlohmann::json j = {{"task",
           {{"_name", task},
            {"data", data},
            {"tokens_per_sample", tokens_per_sample},
            {"sample_break_mode", data::break_mode_name(sample_break_mode)},
            {"shorten_method", data::shorten_method_name(shorten_method)},
            {"shorten_data_split_list", shorten_data_split_list},
            {"seed", seed}}},
          {"dataset",
           {{"max_tokens", max_tokens},
            {"batch_size", batch_size},
            {"required_batch_size_multiple", required_batch_size_multiple},
            {"max_tokens_valid", max_tokens_valid},
            {"batch_size_valid", batch_size_valid},
            {"valid_subset", valid_subset},
            {"train_subset", train_subset},
            {"max_valid_steps", max_valid_steps},
            {"validate_after_updates", validate_after_updates},
            {"validate_interval", validate_interval},
            {"validate_interval_updates", validate_interval_updates},
            {"disable_validation", disable_validation},
            {"skip_invalid_size_inputs_valid_test", skip_invalid_size_inputs_valid_test},
            {"curriculum", curriculum}}},
          {"optimization",
           {{"max_update", max_update},
            {"max_epoch", max_epoch},
            {"update_freq", update_freq},
            {"skip_remainder_batch", skip_remainder_batch},
            {"clip_norm", o.clip_norm},
            {"sentence_avg", o.sentence_avg},
            {"lr", o.lr.size() == 1 ? nlohmann::json(o.lr[0]) : nlohmann::json(o.lr)},
            {"stop_min_lr", o.stop_min_lr},
            {"stop_time_hours", stop_time_hours}}},
          {"optimizer",
           {{"_name", optim::optimizer_kind_name(o.optimizer)},
            {"momentum", o.momentum},
            {"weight_decay", o.weight_decay},
            {"adam_betas", o.adam_betas},
            {"adam_eps", o.adam_eps},
            {"adagrad_clip", o.adagrad_clip},
            {"adafactor_eps", o.adafactor_eps},
            {"clip_threshold", o.clip_threshold},
            {"decay_rate", o.decay_rate},
            {"beta1", o.beta1 ? nlohmann::json(*o.beta1) : nlohmann::json(nullptr)},
            {"scale_parameter", o.scale_parameter},
            {"relative_step", o.relative_step},
            {"warmup_init", o.warmup_init}}},
          {"lr_scheduler",
           {{"_name", optim::scheduler_kind_name(o.lr_scheduler)},
            {"warmup_updates", o.warmup_updates},
            {"warmup_init_lr", o.warmup_init_lr},
            {"min_lr", o.min_lr},
            {"max_lr", o.max_lr},
            {"lr_period_updates", o.lr_period_updates},
            {"t_mult", o.t_mult},
            {"lr_shrink", o.lr_shrink},
            {"end_learning_rate", o.end_learning_rate},
            {"power", o.power},
            {"total_num_update", o.total_num_update},
            {"force_anneal", o.force_anneal},
            {"warmup_steps", o.warmup_steps},
            {"hold_steps", o.hold_steps},
            {"decay_steps", o.decay_steps},
            {"phase_ratio", o.phase_ratio.empty() ? nlohmann::json() : nlohmann::json(o.phase_ratio)},
            {"init_lr_scale", o.init_lr_scale},
            {"final_lr_scale", o.final_lr_scale},
            {"shrink_min", o.shrink_min},
            {"lr_deacy_period", o.lr_deacy_period},
            {"lr_decay", o.lr_decay},
            {"lr_threshold", o.lr_threshold},
            {"lr_patience", o.lr_patience}}},
          {"checkpoint",
           {{"save_dir", save_dir},
            {"no_save", no_save},
            {"save_interval", save_interval},
            {"save_interval_updates", save_interval_updates},
            {"keep_last_epochs", keep_last_epochs},
            {"keep_interval_updates", keep_interval_updates},
            {"keep_best_checkpoints", keep_best_checkpoints},
            {"no_epoch_checkpoints", no_epoch_checkpoints},
            {"restore_file", restore_file},
            {"checkpoint_suffix", checkpoint_suffix},
            {"reset_optimizer", reset_optimizer},
            {"reset_dataloader", reset_dataloader},
            {"reset_meters", reset_meters},
            {"reset_lr_scheduler", reset_lr_scheduler},
            {"no_last_checkpoints", no_last_checkpoints},
            {"no_save_optimizer_state", no_save_optimizer_state},
            {"patience", patience},
            {"best_checkpoint_metric", best_checkpoint_metric},
            {"maximize_best_checkpoint_metric", maximize_best_checkpoint_metric},
            {"finetune_from_model", finetune_from_model}}},
          {"common",
           {{"log_format", log_format_name(log_format)},
            {"log_interval", log_interval},
            {"log_full_precision", log_full_precision},
            {"checkpoint_activations", checkpoint_activations},
            {"max_consecutive_nan", max_consecutive_nan}}},
          {"ema",
           {{"store_ema", ema.store},
            {"ema_decay", ema.decay},
            {"ema_start_update", ema.start_update},
            {"ema_seed_model", ema.seed_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(ema.seed_model)},
            {"ema_update_freq", ema.update_freq},
            {"ema_fp32", ema.fp32}}},
          {"model", model}};
  if (task == lm_task_name(LmTask::TruncatedBptt)) j["task"]["bptt_order"] = bptt_order_name(bptt_order);
  if (task == lm_task_name(LmTask::MaskedLm)) {
    j["task"]["mask_prob"] = mask.mask_prob;
    j["task"]["leave_unmasked_prob"] = mask.leave_unmasked_prob;
    j["task"]["random_token_prob"] = mask.random_token_prob;
  }
  return j;
}

}  // namespace stretch::train
