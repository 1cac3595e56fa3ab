// cli/cmd_train.cpp — `stretch train DATA [fairseq flags]`: flags -> train::TrainConfig ->
// train::run_training(). Model flags given on the command line override the --arch preset,
// as fairseq's architecture functions fill only what is still unset.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/config_file.h"
#include "cli/model_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "train/lm_data.h"
#include "train/optim_settings.h"
#include "train/trainer.h"

namespace stretch::cli {

namespace {
// --flag NAME for an enum with `count` values 0..count-1 and the layer's one name function:
// CLI11 checks the name against the list; the value is set from it.
template <class E>
CLI::Option* add_enum_option(CLI::App& sub, const std::string& flag, E& target, int count, const char* (*name)(E),
                             const std::string& help = "") {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(name(static_cast<E>(i)));
  return sub.add_option_function<std::string>(
                flag,
                [&target, count, name](const std::string& v) {
                  for (int i = 0; i < count; ++i)
                    if (v == name(static_cast<E>(i))) target = static_cast<E>(i);
                },
                help)
      ->check(CLI::IsMember(names))
      ->default_str(name(target));
}
}  // namespace

void add_train(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<train::TrainConfig>();
  auto common = std::make_shared<CommonOptions>();
  auto model = std::make_shared<ModelFlags>();
  auto log_format = std::make_shared<std::string>();  // unset: fairseq's default (tqdm, or simple)
  auto dump_config = std::make_shared<bool>(false);
  auto lr_text = std::make_shared<std::string>("0.25");
  auto& c = *cfg;
  auto& o = cfg->optim;

  // argparse semantics, as in fairseq: an option given twice takes the last value.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Keys of the model config that the run derives (from dict.txt) or that only evaluation uses.
  enable_json_config(sub, derived_model_keys());
  add_common_options(sub, *common);
  sub.add_option("data,--data", c.data,
                 "data-bin directory made by `stretch preprocess` or fairseq-preprocess (positional, --data, or "
                 "\"data\" in --config)");
  sub.add_option("--task", c.task,
                 "language_modeling | truncated_bptt_lm (--batch-size streams walked in order, memory carried "
                 "across batches with --mem-len; REFERENCE.md §6.5) | masked_lm (encoders: --arch roberta_*)")
      ->check(CLI::IsMember({"language_modeling", "truncated_bptt_lm", "masked_lm"}))
      ->capture_default_str();
  sub.add_option("--mask-prob", c.mask.mask_prob, "masked_lm: probability of choosing a token for prediction")
      ->capture_default_str();
  sub.add_option("--leave-unmasked-prob", c.mask.leave_unmasked_prob,
                 "masked_lm: share of the chosen tokens left unchanged")
      ->capture_default_str();
  sub.add_option("--random-token-prob", c.mask.random_token_prob,
                 "masked_lm: share of the chosen tokens replaced by a random token")
      ->capture_default_str();
  add_enum_option(sub, "--bptt-order", c.bptt_order, train::kBpttOrderCount, train::bptt_order_name,
                  "truncated_bptt_lm: fairseq (blocks of --tokens-per-sample, the last position of each block has no "
                  "target) | transformer_xl (the original LMOrderedIterator: targets cross segment boundaries)");
  sub.add_option("--tokens-per-sample", c.tokens_per_sample, "block length L (training length)")
      ->transform(int_at_least(1, "the training block length"))->capture_default_str();
  add_enum_option(sub, "--sample-break-mode", c.sample_break_mode, data::kBreakModeCount, data::break_mode_name,
                  "none | eos | complete");
  add_enum_option(sub, "--shorten-method", c.shorten_method, data::kShortenMethodCount, data::shorten_method_name,
                  "lines longer than --tokens-per-sample: none | truncate (their first tokens) | random_crop (as "
                  "fairseq's RandomCropDataset crops them)");
  sub.add_option("--shorten-data-split-list", c.shorten_data_split_list,
                 "the splits --shorten-method applies to, comma-separated (default: every split)");
  sub.add_option("--max-tokens", c.max_tokens, "max tokens per batch (per process)")
      ->transform(int_at_least(0, "0: unset; give --max-tokens or --batch-size"));
  sub.add_option("--batch-size,--max-sentences", c.batch_size, "max blocks per batch")
      ->transform(int_at_least(0, "0: unset; give --max-tokens or --batch-size"));
  sub.add_option("--required-batch-size-multiple", c.required_batch_size_multiple)
      ->transform(int_at_least(1, "batch sizes are rounded to a multiple of it; 1: no rounding"))->capture_default_str();
  sub.add_option("--max-tokens-valid", c.max_tokens_valid)->transform(int_at_least(0, "0: as --max-tokens"));
  sub.add_option("--batch-size-valid", c.batch_size_valid)->transform(int_at_least(0, "0: as --batch-size"));
  sub.add_option("--update-freq", c.update_freq, "accumulate gradients over N batches per update")
      ->transform(int_at_least(1, "batches per update"))->capture_default_str();
  sub.add_option("--curriculum", c.curriculum,
                 "the first N epochs visit the batches in their frozen order, unshuffled (fairseq's flag)")
      ->transform(int_at_least(0, "0: every epoch shuffled"));
  sub.add_flag("--skip-remainder-batch", c.skip_remainder_batch,
               "each epoch drops its last batch and then the batches after the last whole --update-freq group "
               "(fairseq's flag)");
  sub.add_option("--max-update", c.max_update, "stop after N updates (0: no limit)")
      ->transform(int_at_least(0, "0: no limit"));
  sub.add_option("--max-epoch", c.max_epoch, "stop after N epochs (0: no limit)")->transform(int_at_least(0, "0: no limit"));
  sub.add_option("--seed", c.seed)->capture_default_str();
  sub.add_option("--valid-subset", c.valid_subset, "validation split(s), comma separated; the first tracks the best")
      ->capture_default_str();
  sub.add_option("--train-subset", c.train_subset, "the training split")->capture_default_str();
  sub.add_option("--max-valid-steps", c.max_valid_steps,
                 "validate on the first N+1 batches (fairseq stops once the batch index exceeds N)")
      ->transform(int_at_least(0, "batches of a validation", /*also=*/-1));
  sub.add_option("--validate-after-updates", c.validate_after_updates,
                 "no validation and no interval checkpoint before this update")
      ->transform(int_at_least(0, "0: from the start"));
  sub.add_option("--patience", c.patience,
                 "stop after N validations in a row without a better loss (fairseq's early stopping; <= 0: off)");
  sub.add_option("--stop-time-hours", c.stop_time_hours,
                 "stop once the cumulative training time (kept across resumes) exceeds it (0: off)")
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--no-last-checkpoints", c.no_last_checkpoints, "never write checkpoint_last.pt");
  sub.add_flag("--no-save-optimizer-state", c.no_save_optimizer_state,
               "checkpoints without the optimizer state (smaller); a resume from one restarts the optimizer and "
               "num_updates, as fairseq's does");
  sub.add_option("--best-checkpoint-metric", c.best_checkpoint_metric,
                 "loss | ppl: the validation metric checkpoint_best.pt and --patience follow (they rank alike)")
      ->check(CLI::IsMember({"loss", "ppl"}));
  sub.add_flag("--maximize-best-checkpoint-metric", c.maximize_best_checkpoint_metric,
               "the best checkpoint has the largest metric (fairseq's flag; for a loss this keeps the worst)");
  sub.add_option("--validate-interval", c.validate_interval, "validate every N epochs")
      ->transform(int_at_least(1, "validate every N epochs; --disable-validation turns it off"))->capture_default_str();
  sub.add_option("--validate-interval-updates", c.validate_interval_updates, "validate every N updates")
      ->transform(int_at_least(0, "0: off"));
  sub.add_flag("--disable-validation", c.disable_validation);
  sub.add_flag("--skip-invalid-size-inputs-valid-test", c.skip_invalid_size_inputs_valid_test);
  sub.add_option("--save-dir", c.save_dir)->capture_default_str();
  sub.add_flag("--no-save", c.no_save);
  sub.add_flag("--no-epoch-checkpoints", c.no_epoch_checkpoints);
  sub.add_option("--save-interval", c.save_interval)
      ->transform(int_at_least(1, "save every N epochs; --no-epoch-checkpoints or --no-save turn it off"))
      ->capture_default_str();
  sub.add_option("--save-interval-updates", c.save_interval_updates)->transform(int_at_least(0, "0: off"));
  sub.add_option("--keep-last-epochs", c.keep_last_epochs)->transform(int_at_least(-1, "-1: keep all"));
  sub.add_option("--keep-interval-updates", c.keep_interval_updates)->transform(int_at_least(-1, "-1: keep all"));
  sub.add_option("--keep-best-checkpoints", c.keep_best_checkpoints,
                 "keep the N best checkpoint.best_<metric>_X.pt files (fairseq's names)")
      ->transform(int_at_least(-1, "-1 or 0: none"));
  sub.add_option("--restore-file", c.restore_file)->capture_default_str();
  sub.add_option("--checkpoint-suffix", c.checkpoint_suffix,
                 "written before \".pt\" in every checkpoint name (checkpoint_last-S.pt, ...), and looked for on "
                 "resume (fairseq's flag)")
      ->check([](const std::string& s) {
        return s.find('/') == std::string::npos && s.find(".pt") == std::string::npos
                   ? std::string()
                   : "'" + s + "': the suffix of a file name in --save-dir may hold neither '/' nor \".pt\"";
      });
  sub.add_flag("--reset-optimizer", c.reset_optimizer,
               "restore the weights, not the optimizer state: num_updates starts at 0 (fairseq), the best loss is forgotten");
  sub.add_flag("--reset-dataloader", c.reset_dataloader, "restore the weights but start at epoch 1, batch 0");
  sub.add_flag("--reset-meters", c.reset_meters, "restore but forget the best validation loss and the meters");
  sub.add_flag("--reset-lr-scheduler", c.reset_lr_scheduler,
               "accepted; no effect: schedules are functions of the update number (--reset-optimizer restarts it)");
  sub.add_option("--finetune-from-model", c.finetune_from_model,
                 "on a first launch (no checkpoint_last.pt in --save-dir): start from this model's weights with the "
                 "optimizer, lr scheduler, meters and dataloader reset");
  sub.add_option("--log-format", *log_format,
                 "simple | json | tqdm | none, as fairseq writes them (default: tqdm on a terminal, else simple; "
                 "simple with --no-progress-bar)")
      ->check(CLI::IsMember({"json", "simple", "none", "tqdm"}));
  sub.add_flag("--log-full-precision", c.log_full_precision,
               "stretch: JSON log values as numbers with every digit (fairseq rounds them), for exact comparisons");
  sub.add_option("--log-interval", c.log_interval)->transform(int_at_least(1, "log every N updates"))->capture_default_str();
  sub.add_flag("--no-progress-bar", c.no_progress_bar);
  sub.add_option("--tensorboard-logdir", c.tensorboard_logdir,
                 "write TensorBoard event files of the logged stats to DIR/<tag>/ (train_inner, train, valid), as "
                 "fairseq does");
  sub.add_option("--log-file", c.log_file,
                 "also append the train logger's messages and the progress lines, without time and level, to FILE "
                 "(fairseq's FileHandler)");
  sub.add_option("--max-consecutive-nan", c.max_consecutive_nan,
                 "stop after this many non-finite losses in a row (each update is skipped with a warning)")
      ->transform(int_at_least(1, "non-finite losses in a row before stopping"))->capture_default_str();
  // fairseq's EMAConfig (train/ema.h): a moving average of the weights, stored in the checkpoints.
  sub.add_flag("--store-ema", c.ema.store,
               "keep an exponential moving average of the weights, saved in every checkpoint as ema.* tensors "
               "(export-fairseq writes it as extra_state['ema'])");
  sub.add_option("--ema-decay", c.ema.decay, "the average's decay per EMA step, in [0, 1]")->capture_default_str();
  sub.add_option("--ema-start-update", c.ema.start_update,
                 "before this update the average is a copy of the weights (decay 0)")
      ->transform(int_at_least(0, "0: decay from the first update"))->capture_default_str();
  sub.add_option("--ema-update-freq", c.ema.update_freq, "move the average every N updates")
      ->transform(int_at_least(1, "updates per EMA step"))->capture_default_str();
  sub.add_flag("--ema-fp32", c.ema.fp32, "accepted: the average is fp32 already (stretch's weights are fp32)");
  sub.add_option("--ema-seed-model", c.ema.seed_model, "not supported (refused): the average starts from the weights");
  sub.add_flag("--dump-config", *dump_config, "print the effective configuration as JSON and exit");

  // Optimization
  add_enum_option(sub, "--optimizer", o.optimizer, optim::kOptimizerKindCount, optim::optimizer_kind_name);
  sub.add_option("--lr", *lr_text, "learning rate; fairseq's list \"0.25,0.1\" gives --lr-scheduler fixed one per epoch")
      ->capture_default_str();
  sub.add_option("--momentum", o.momentum)->capture_default_str();
  sub.add_option("--weight-decay,--wd", o.weight_decay)->capture_default_str();
  sub.add_option("--adam-betas", o.adam_betas)->capture_default_str();
  sub.add_option("--adam-eps", o.adam_eps)->capture_default_str();
  sub.add_option("--adagrad-clip", o.adagrad_clip);
  sub.add_option("--adafactor-eps", o.adafactor_eps, "adafactor: \"(eps1, eps2)\": eps1 added to g^2, eps2 the floor of "
                 "the parameter RMS (--scale-parameter)")->capture_default_str();
  sub.add_option("--clip-threshold", o.clip_threshold, "adafactor: clip the update's RMS to this (> 0)")->capture_default_str();
  sub.add_option("--decay-rate", o.decay_rate, "adafactor: beta2 of step t is 1 - t^decay_rate (< 0)")->capture_default_str();
  sub.add_option("--beta1", o.beta1, "adafactor: first-moment beta in [0, 1) (default: none, no first moment)");
  sub.add_flag("--scale-parameter", o.scale_parameter, "adafactor: scale the lr by max(eps2, RMS of the parameter)");
  sub.add_flag("--relative-step", o.relative_step,
               "adafactor: lr = min(1e-2, 1/sqrt(t)) instead of the schedule's (do not give --lr with it)");
  sub.add_flag("--warmup-init", o.warmup_init, "adafactor with --relative-step: lr = min(1e-6 t, 1/sqrt(t))");
  add_enum_option(sub, "--lr-scheduler", o.lr_scheduler, optim::kSchedulerKindCount, optim::scheduler_kind_name);
  sub.add_option("--warmup-updates", o.warmup_updates)->transform(int_at_least(0, "0: no warmup"));
  sub.add_option("--warmup-init-lr", o.warmup_init_lr);
  sub.add_option("--min-lr", o.min_lr);
  sub.add_option("--max-lr", o.max_lr, "triangular: the peak lr (required there; cosine ignores it, as fairseq)");
  sub.add_option("--lr-period-updates", o.lr_period_updates,
                 "cosine's first period (-1: --max-update minus --warmup-updates); triangular's cycle (-1: 5000)")
      ->transform(int_at_least(1, "a period in updates; -1 (the default): the schedule's default", /*also=*/-1));
  sub.add_flag("--shrink-min", o.shrink_min, "triangular: --lr-shrink also shrinks the lower bound");
  sub.add_option("--lr-deacy-period", o.lr_deacy_period, "step: updates between decays (fairseq's spelling)")
      ->capture_default_str();
  sub.add_option("--lr-decay", o.lr_decay, "step: the factor applied every --lr-deacy-period updates")
      ->capture_default_str();
  sub.add_option("--warmup-steps", o.warmup_steps, "tri_stage: warmup updates")->transform(int_at_least(0, "0: none"));
  sub.add_option("--hold-steps", o.hold_steps, "tri_stage: updates held at --lr")->transform(int_at_least(0, "0: none"));
  sub.add_option("--decay-steps", o.decay_steps, "tri_stage: updates of exponential decay to --final-lr-scale x --lr")
      ->transform(int_at_least(0, "tri_stage needs > 0, or --phase-ratio"));
  sub.add_option("--phase-ratio", o.phase_ratio,
                 "tri_stage: \"(warmup, hold, decay)\" fractions of --max-update adding up to 1 (overrides the steps)");
  sub.add_option("--init-lr-scale", o.init_lr_scale, "tri_stage: the warmup starts at this x --lr")->capture_default_str();
  sub.add_option("--final-lr-scale", o.final_lr_scale, "tri_stage: the decay ends at this x --lr")->capture_default_str();
  sub.add_option("--t-mult", o.t_mult);
  sub.add_option("--lr-shrink", o.lr_shrink, "cosine, fixed with --force-anneal, triangular, reduce_lr_on_plateau: "
                 "the shrink factor")->capture_default_str();
  sub.add_option("--lr-threshold", o.lr_threshold,
                 "reduce_lr_on_plateau: a validation metric better by less than this fraction is no improvement")
      ->capture_default_str();
  sub.add_option("--lr-patience", o.lr_patience,
                 "reduce_lr_on_plateau: epochs without improvement before the lr shrinks")
      ->transform(int_at_least(0, "0: shrink after the first epoch without improvement"))->capture_default_str();
  sub.add_option("--end-learning-rate", o.end_learning_rate);
  sub.add_option("--power", o.power);
  sub.add_option("--total-num-update", o.total_num_update)->transform(int_at_least(0, "0: --max-update"));
  sub.add_option("--force-anneal", o.force_anneal)->transform(int_at_least(0, "0: off"));
  sub.add_option("--stop-min-lr", o.stop_min_lr);
  sub.add_option("--clip-norm", o.clip_norm, "clip the global gradient norm (0: off)");
  sub.add_flag("--sentence-avg", o.sentence_avg,
               "normalise the gradient and the logged loss by the rows of the batch (fairseq's sentences: blocks "
               "with --sample-break-mode none, lines with eos, packed lines with complete), not the targets");
  sub.add_option("--ddp-backend", c.ddp_backend,
                 "under mpirun: pytorch_ddp/c10d sum gradients in buckets during backward, legacy_ddp/no_c10d "
                 "after it")
      ->check(CLI::IsMember({"pytorch_ddp", "c10d", "legacy_ddp", "no_c10d"}))
      ->capture_default_str();
  sub.add_option("--bucket-cap-mb", c.bucket_cap_mb, "gradient bucket size for --ddp-backend pytorch_ddp (MiB)")
      ->transform(int_at_least(0, "0: one parameter per bucket"))
      ->capture_default_str();

  sub.add_flag("--checkpoint-activations", c.checkpoint_activations,
               "recompute each block's activations in backward instead of keeping them: less memory for long "
               "contexts, about one more forward of time, the same losses and gradients bit for bit "
               "(transformer_lm and roberta families)");

  add_model_flags(sub, *model);

  // fairseq flags with no meaning on a CPU build (accepted, reported once).
  add_ignored_flag(sub, "--fp16-no-flatten-grads", "gradients are never flattened", false);
  add_ignored_flag(sub, "--fp16-init-scale", "bf16 needs no loss scaling", true);
  add_ignored_flag(sub, "--fp16-scale-window", "bf16 needs no loss scaling", true);
  add_ignored_flag(sub, "--memory-efficient-fp16", "--bf16 keeps fp32 weights and optimizer state", false);
  add_ignored_flag(sub, "--num-workers", "data loading is memory-mapped in-process", true);
  add_ignored_flag(sub, "--distributed-world-size", "the world size comes from mpirun", true);
  add_ignored_flag(sub, "--user-dir", "every model is built in", true);
  add_ignored_flag(sub, "--cpu", "stretch always runs on the CPU", false);
  add_ignored_flag(sub, "--offload-activations", "activations already live in host memory (no accelerator to offload from)",
                   false);
  add_ignored_flag(sub, "--threshold-loss-scale", "bf16 needs no loss scaling", true);
  add_ignored_flag(sub, "--min-loss-scale", "bf16 needs no loss scaling", true);
  add_ignored_flag(sub, "--empty-cache-freq", "there is no accelerator memory cache to empty", true);
  add_ignored_flag(sub, "--all-gather-list-size", "the logging stats are summed with MPI, not pickled into a buffer",
                   true);
  add_ignored_flag(sub, "--heartbeat-timeout", "mpirun watches the processes", true);
  add_ignored_flag(sub, "--distributed-no-spawn", "mpirun starts the processes", false);
  add_ignored_flag(sub, "--on-cpu-convert-precision", "weights and optimizer state stay fp32", false);
  // fairseq seeds torch before each validation with it; stretch's validation draws no random number
  // (no dropout in evaluation, batches in order) and each update's dropout is seeded by (seed, update).
  add_ignored_flag(sub, "--fixed-validation-seed",
                   "nothing in validation draws from a generator it would seed (no dropout in evaluation)", true);
  add_one_value_flag(sub, "--dataset-impl", "mmap", "stretch reads fairseq's default format, MMIDIDX");
  add_one_value_flag(sub, "--model-parallel-size", "1", "stretch is data parallel only");

  run = [cfg, common, model, log_format, dump_config, lr_text, app = &sub] {
    apply_common_options(*common);
    auto& c = *cfg;
    if (c.data.empty())
      fail_usage("train: no data directory", "give it first: `stretch train data-bin/NAME ...` (or --data, or in --config)");
    c.optim.lr = optim::parse_float_list("--lr", *lr_text);
    // fairseq: --log-format unset means tqdm, or simple with --no-progress-bar.
    const std::string lf = log_format->empty() ? (c.no_progress_bar ? "simple" : "tqdm") : *log_format;
    c.log_format = lf == "json" ? train::LogFormat::Json
                   : lf == "none" ? train::LogFormat::None
                   : lf == "tqdm" ? train::LogFormat::Tqdm : train::LogFormat::Simple;
    if (model->wants_help()) {
      std::cout << models::arch_table();
      return 0;
    }
    c.model = model->resolve(c.tokens_per_sample);
    {
      // The model flags' values, checked now rather than after the data is read (the vocabulary
      // size comes from dict.txt later; the largest placeholder passes its own check and the
      // cutoffs' "below the vocabulary size", which the model checks again with the real size).
      nlohmann::json check = c.model;
      check["vocab_size"] = 2147483647;
      models::validate_config(check);
    }
    // fairseq 0.12.2 refuses a run without --optimizer ("--optimizer is required!"); its --lr
    // default is 0.25 and its --lr-scheduler default fixed, which stretch shares. Say which
    // optimizer stretch picks instead of refusing (the seed commands always give one).
    if (app->count("--optimizer") == 0)
      log_once(LogLevel::Warning,
               std::string("no --optimizer given (fairseq 0.12.2 refuses that): using ") +
                   optim::optimizer_kind_name(c.optim.optimizer) + " with --lr " + *lr_text +
                   (app->count("--lr") == 0 ? " (fairseq's default)" : "") + " and --lr-scheduler " +
                   optim::scheduler_kind_name(c.optim.lr_scheduler) + "; give --optimizer adam --lr 0.0005 ... to choose");
    if (*dump_config) {
      std::cout << c.to_json().dump(2) << "\n";
      return 0;
    }
    // The schedule's flags (e.g. triangular without --max-lr) checked before the data is read.
    train::make_scheduler(c);
    train::make_optimizer(c.optim);  // and the optimizer's (e.g. --clip-threshold 0, --beta1 without adafactor)
    return train::run_training(c);
  };
}

}  // namespace stretch::cli
