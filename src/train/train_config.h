// train/train_config.h — everything `stretch train` is told, as one typed struct with fairseq's
// argument names. The CLI (cli/cmd_train.cpp) fills it; to_json() is saved in every
// checkpoint next to the model config and printed by --dump-config.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/bptt_stream.h"
#include "data/shorten.h"
#include "data/token_blocks.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/ema.h"
#include "train/lm_data.h"


namespace stretch::train {

// --log-format; fairseq's default is tqdm (simple with --no-progress-bar; tqdm falls back to
// simple when stderr is not a terminal).
enum class LogFormat : uint8_t { Simple, Json, None, Tqdm };
const char* log_format_name(LogFormat f);

// --ddp-backend names: true for the bucketed all-reduce overlapped with backward.
inline bool ddp_overlaps(const std::string& backend) { return backend == "pytorch_ddp" || backend == "c10d"; }

struct OptimSettings {
  optim::OptimizerKind optimizer = optim::OptimizerKind::Nag;  // --optimizer (optim/optimizer.h names)
  std::vector<double> lr = {0.25};    // --lr "0.25" or "0.25,0.1" (fixed: one per epoch, the last repeats)
  double momentum = 0.99;             // nag / sgd
  double weight_decay = 0.0;
  std::string adam_betas = "(0.9, 0.999)";
  double adam_eps = 1e-8;
  double adagrad_clip = 0.0;
  // adafactor (fairseq's FairseqAdafactor flags and defaults)
  std::string adafactor_eps = "(1e-30, 1e-3)";
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  std::optional<double> beta1 = {};   // unset: no first moment
  bool scale_parameter = false;
  bool relative_step = false;
  bool warmup_init = false;
  optim::SchedulerKind lr_scheduler = optim::SchedulerKind::Fixed;  // --lr-scheduler (optim/lr_scheduler.h)
  int64_t warmup_updates = 0;
  double warmup_init_lr = -1;         // < 0: scheduler default
  double min_lr = 0.0;
  double max_lr = -1;                 // triangular's peak (required there); cosine ignores it, as fairseq 0.12.2
  int64_t lr_period_updates = -1;
  double t_mult = 1.0;
  double lr_shrink = 0.1;
  double end_learning_rate = 0.0;
  double power = 1.0;
  int64_t total_num_update = 0;
  int64_t force_anneal = 0;
  int64_t warmup_steps = 0;           // tri_stage
  int64_t hold_steps = 0;             // tri_stage
  int64_t decay_steps = 0;            // tri_stage
  std::string phase_ratio;            // tri_stage "(0.1, 0.4, 0.5)"; empty: the steps above
  double init_lr_scale = 0.01;        // tri_stage
  double final_lr_scale = 0.01;       // tri_stage
  bool shrink_min = false;            // triangular
  int64_t lr_deacy_period = 25000;    // step (fairseq's spelling of "decay")
  double lr_decay = 0.5;              // step
  double lr_threshold = 1e-4;         // reduce_lr_on_plateau
  int64_t lr_patience = 0;            // reduce_lr_on_plateau
  double stop_min_lr = -1.0;
  double clip_norm = 0.0;
  bool sentence_avg = false;          // --sentence-avg: the gradient and "loss" per row (sentence), not per target
};

struct TrainConfig {
  std::string data;                    // data-bin directory (positional)
  std::string task = "language_modeling";  // language_modeling | truncated_bptt_lm | masked_lm (train/lm_data.h LmTask)
  data::BpttTargets bptt_order = data::BpttTargets::WithinBlock;  // --bptt-order (truncated_bptt_lm)
  MaskSettings mask{};  // --mask-prob, --leave-unmasked-prob, --random-token-prob (masked_lm)
  int64_t tokens_per_sample = 512;
  data::BreakMode sample_break_mode = data::BreakMode::None;  // --sample-break-mode
  data::ShortenMethod shorten_method = data::ShortenMethod::None;  // --shorten-method (data/shorten.h)
  std::string shorten_data_split_list{};                           // --shorten-data-split-list ("": every split)
  int64_t max_tokens = 0;
  int64_t batch_size = 0;
  int64_t required_batch_size_multiple = 8;
  int64_t max_tokens_valid = 0;
  int64_t batch_size_valid = 0;
  int64_t update_freq = 1;
  // fairseq's --skip-remainder-batch: each epoch drops its last batch (the shard's, on one process), then
  // the batches after the last whole group of --update-freq (epoch_batches_used()).
  bool skip_remainder_batch = false;
  int64_t curriculum = 0;  // fairseq's --curriculum N: epochs 1..N visit the batches unshuffled (frozen order)
  int64_t max_update = 0;
  int64_t max_epoch = 0;
  uint64_t seed = 1;
  std::string valid_subset = "valid";     // one split or several, comma separated (the first tracks the best)
  std::string train_subset = "train";
  int64_t max_valid_steps = -1;           // fairseq: stop validating once the batch index exceeds it (-1: all)
  int64_t validate_after_updates = 0;     // no validation (and no interval save) before this update
  int64_t patience = -1;                  // stop after this many validations without improvement (<= 0: off)
  double stop_time_hours = 0;             // stop once the cumulative training time exceeds it (0: off)
  bool no_last_checkpoints = false;       // never write checkpoint_last.pt
  bool no_save_optimizer_state = false;   // checkpoints without the optimizer state (a resume restarts it)
  std::string best_checkpoint_metric = "loss";  // loss | ppl (the same ranking here)
  bool maximize_best_checkpoint_metric = false;
  int64_t validate_interval = 1;          // epochs
  int64_t validate_interval_updates = 0;
  bool disable_validation = false;
  std::string save_dir = "checkpoints";
  bool no_save = false;
  bool no_epoch_checkpoints = false;
  int64_t save_interval = 1;              // epochs
  int64_t save_interval_updates = 0;
  int64_t keep_last_epochs = -1;
  int64_t keep_interval_updates = -1;
  int64_t keep_best_checkpoints = -1;  // fairseq's: keep the N best checkpoint.best_<metric>_X.pt (train/best_checkpoints.h)
  std::string restore_file = "checkpoint_last.pt";  // fairseq: this name is looked up in save_dir
  std::string checkpoint_suffix;  // fairseq's --checkpoint-suffix: before ".pt" in every name written or restored
  bool reset_optimizer = false;
  bool reset_dataloader = false;          // resume at epoch 1, batch 0
  bool reset_meters = false;              // forget the best validation loss and the meters
  bool reset_lr_scheduler = false;        // no effect: schedules are functions of the update number
  std::string finetune_from_model{};      // --restore-file with all four resets, on a first launch
  LogFormat log_format = LogFormat::Tqdm;
  int64_t log_interval = 100;
  bool log_full_precision = false;        // stretch: JSON log values as numbers with every digit
  std::string tensorboard_logdir{};       // --tensorboard-logdir: TensorBoard event files (train/tensorboard_writer.h)
  std::string log_file{};                 // --log-file: the train logger's and the progress lines, bare (train/progress.h)
  bool no_progress_bar = false;
  // --checkpoint-activations: recompute each block's activations in backward (less memory, about
  // one more forward of time; the same numbers). A training option, not a model property: it is
  // in this config (group "common"), never in the model config a model file carries.
  bool checkpoint_activations = false;
  int64_t max_consecutive_nan = 10;       // stop after this many skipped non-finite updates in a row
  EmaSettings ema{};                      // --store-ema and its flags (train/ema.h; fairseq's "ema" group)
  bool skip_invalid_size_inputs_valid_test = false;
  // fairseq's distributed_training group. --ddp-backend: pytorch_ddp / c10d sum gradients in
  // buckets of --bucket-cap-mb overlapped with backward; legacy_ddp / no_c10d after backward,
  // one all-reduce per parameter (train/update.h). Same sums either way for 2 processes.
  std::string ddp_backend = "pytorch_ddp";
  int64_t bucket_cap_mb = 25;
  OptimSettings optim;
  // The model config (fairseq keys, "arch" included; models/registry.h resolves and builds it).
  nlohmann::json model = nlohmann::json::object();

  nlohmann::json to_json() const;
};

}  // namespace stretch::train
