// train/trainer.cpp — the training loop of `stretch train` (contract in trainer.h): fairseq's
// fairseq_cli/train.py main/train/validate_and_save and checkpoint_utils.save_checkpoint, with
// each update delegated to train_update() (train/update.h).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/log.h"
#include "core/orphans.h"
#include "core/signals.h"
#include "dist/world.h"
#include "ops/gemm.h"
#include "optim/optimizer.h"
#include "models/registry.h"
#include "train/best_checkpoints.h"
#include "train/bf16_resume.h"
#include "train/checkpoint.h"
#include "train/ema.h"
#include "train/lm_data.h"
#include "train/masked_lm_data.h"
#include "train/memory_estimate.h"
#include "train/optim_settings.h"
#include "train/progress.h"
#include "train/save_dir.h"
#include "train/test_hooks.h"
#include "train/update.h"

namespace stretch::train {
namespace fs = std::filesystem;
using autograd::Var;

namespace {

constexpr double kLn2 = 0.69314718055994530942;
constexpr const char* kDefaultRestoreFile = "checkpoint_last.pt";

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Mean NLL (base 2) over a split's non-pad targets, no dropout, no gradient.
struct ValidResult {
  double loss2 = 0;
  int64_t ntokens = 0;
  int64_t nsentences = 0;
  double batches = 0;  // per process (the mean over processes): wpb and bsz are per batch, as fairseq's
  double seconds = 0;
  std::vector<std::pair<std::string, double>> metrics{};  // the family's train_metrics(), mean over batches
};

// max_steps >= 0: fairseq's --max-valid-steps, which stops once the batch index exceeds it (so
// max_steps + 1 batches are scored, as in fairseq_cli/train.py's validate).
// A family with memory across batches (SegmentUse::Training, e.g. --mem-len) validates with a
// memory of its own that starts empty at every validation, as Transformer-XL's evaluate() does
// (the training memory is left as it was), unless `shared` is given: then validation continues
// it and leaves it to training (Adaptive Span: fairseq's decoder keeps one `_mems` for both).
// The family's train_metrics() are averaged over the batches (fairseq's valid_avg_span ...). The loss is divided by the batches' sample size where
// the task fixes it (truncated_bptt_lm: B·T, as fairseq logs it), else by the scored targets.
ValidResult validate(models::LanguageModel& model, LmSplit& split, const dist::World& world, int64_t max_steps,
                     models::SegmentState* shared) {
  autograd::NoGradGuard no_grad;
  const double t0 = now_seconds();
  double sums[4] = {0, 0, 0, 0};  // nats, tokens, sentences, batches
  split.set_epoch(1);
  const int32_t pad = model.info().padding_idx;
  std::unique_ptr<models::SegmentState> own;
  if (!shared) own = model.new_segment_state(models::SegmentUse::Training);
  models::SegmentState* memory = shared ? shared : own.get();
  std::vector<std::pair<std::string, double>> metrics;
  for (int64_t i = 0; i < split.num_batches(); ++i) {
    if (max_steps >= 0 && i > max_steps) break;
    LmBatch b = split.batch(i);
    if (!b.src.defined()) continue;
    Var hidden = model.features(b.src, {.mode = models::Mode::Eval, .state = memory});
    const auto m = model.train_metrics();
    if (metrics.size() != m.size()) metrics.assign(m.size(), {});
    for (size_t k = 0; k < m.size(); ++k) metrics[k] = {m[k].first, metrics[k].second + m[k].second};
    const nn::HeadLoss loss = model.head().loss(hidden, b.tgt, pad, nn::LossUse::Validation);
    sums[0] += loss.loss.value().f32()[0];
    sums[1] += static_cast<double>(b.sample_size > 0 ? b.ntokens : loss.ntokens);
    sums[2] += static_cast<double>(b.src.dim(0));
    sums[3] += 1;
  }
  for (auto& [name, sum] : metrics) sum /= std::max(sums[3], 1.0);  // identical on every rank (the z are)
  world.allreduce_sum(sums, 4);
  return {sums[1] > 0 ? sums[0] / sums[1] / kLn2 : 0.0, static_cast<int64_t>(sums[1]), static_cast<int64_t>(sums[2]),
          sums[3] / world.size(), now_seconds() - t0, std::move(metrics)};
}

std::vector<std::string> split_subsets(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty())
      fail_usage("--valid-subset '" + list + "': an empty split name", "give split names separated by commas, e.g. valid,test");
    out.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The loss fields of fairseq's cross_entropy / adaptive_loss reduce_metrics: "loss" (base 2) per
// sample-size unit; with --sentence-avg (sample size = rows) "loss" per row, then "nll_loss" per
// target, and ppl from nll_loss (fairseq logs nll_loss only when sample_size != ntokens).
Stats loss_stats(double nats, double ntokens, double nsentences, bool sentence_avg) {
  const double per_target = nats / std::max(ntokens, 1.0) / kLn2;
  if (!sentence_avg || nsentences == ntokens) return {{"loss", per_target, 3}, {"ppl", std::pow(2.0, per_target), 2}};
  return {{"loss", nats / std::max(nsentences, 1.0) / kLn2, 3},
          {"nll_loss", per_target, 3},
          {"ppl", std::pow(2.0, per_target), 2}};
}

// 1234567 -> "1,234,567" (Python's "{:,}").
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io(path, "cannot read the dictionary", "check the data directory");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// fairseq's --checkpoint-suffix S: name.replace(".pt", S + ".pt"), Python's str.replace (every ".pt";
// the names stretch writes have one, at the end).
std::string with_suffix(const std::string& name, const std::string& suffix) {
  if (suffix.empty()) return name;
  std::string out;
  size_t from = 0;
  for (size_t at; (at = name.find(".pt", from)) != std::string::npos; from = at + 3) out += name.substr(from, at - from) + suffix + ".pt";
  return out + name.substr(from);
}

// The path in --save-dir of fairseq's checkpoint `name` (checkpoint_last.pt, ...) with --checkpoint-suffix.
std::string ckpt_path(const TrainConfig& c, const std::string& name) {
  return (fs::path(c.save_dir) / with_suffix(name, c.checkpoint_suffix)).string();
}

// fairseq's retention: keep the newest N checkpoint_E_U<suffix>.pt (--keep-interval-updates, by
// update) and checkpointE<suffix>.pt (--keep-last-epochs, by epoch); other suffixes are not touched.
void prune(const TrainConfig& c) {
  const std::string tail = c.checkpoint_suffix + ".pt";
  auto prune_matching = [&](bool interval, int64_t keep) {
    if (keep < 0 || !fs::exists(c.save_dir)) return;
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(c.save_dir)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("checkpoint", 0) != 0 || n.size() < 10 + tail.size() ||
          n.compare(n.size() - tail.size(), tail.size(), tail) != 0)
        continue;
      const std::string mid = n.substr(10, n.size() - 10 - tail.size());
      if (mid.empty() || mid == "_last" || mid == "_best") continue;
      const bool is_interval = mid[0] == '_';
      if (is_interval != interval) continue;
      const std::string key = is_interval ? mid.substr(mid.rfind('_') + 1) : mid;
      if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos) continue;
      found.emplace_back(std::stoll(key), e.path());
    }
    std::sort(found.rbegin(), found.rend());
    for (size_t i = static_cast<size_t>(keep); i < found.size(); ++i) fs::remove(found[i].second);
  };
  prune_matching(true, c.keep_interval_updates);
  prune_matching(false, c.keep_last_epochs);
}

// Makes `to` a complete copy of the finished checkpoint `from`, atomically: a hard link (or,
// where the filesystem has none, a copy) at a temporary name, then a rename over `to`.
void publish_copy(const std::string& from, const std::string& to) {
  // Named for this pid: prepare_save_dir removes it in the next run if this one is killed here.
  const std::string tmp = pid_temporary(to);
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(from, tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  }
  if (!ec) test_hooks::maybe_die_while_publishing();
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    fail_io(to, "could not save (copying " + from + "): " + ec.message(),
            "free disk space or save elsewhere (--save-dir); " + from + " is complete and any previous " + to +
                " is unchanged");
  }
}

// Which checkpoint the run resumes from (fairseq's --restore-file): the default name lives in
// --save-dir and may be absent (a fresh run); any other name must exist.
// --finetune-from-model F (fairseq's checkpoint_utils.load_checkpoint): only on a first launch,
// i.e. while --save-dir has no checkpoint_last.pt, it is --restore-file F with the optimizer, lr
// scheduler, meters and dataloader reset; later launches resume checkpoint_last.pt as usual.
std::string restore_path(TrainConfig& c) {
  if (!c.finetune_from_model.empty()) {
    if (c.restore_file != kDefaultRestoreFile)
      fail_usage("--finetune-from-model and --restore-file " + c.restore_file + " can not be given together",
                 "give one of them (as in fairseq)");
    if (c.reset_optimizer || c.reset_lr_scheduler || c.reset_meters || c.reset_dataloader)
      fail_usage("--finetune-from-model can not be given together with --reset-optimizer, --reset-lr-scheduler, "
                 "--reset-meters or --reset-dataloader",
                 "--finetune-from-model resets all four itself (as in fairseq)");
    const std::string last = ckpt_path(c, kDefaultRestoreFile);
    if (fs::exists(last)) {
      log_info("--finetune-from-model " + c.finetune_from_model + " is not used: " + last +
               " exists, so this launch resumes it (as fairseq does)");
      return last;
    }
    if (!fs::exists(c.finetune_from_model))
      fail_input(c.finetune_from_model, "--finetune-from-model not found", "give the path of a model file or checkpoint");
    c.reset_optimizer = c.reset_lr_scheduler = c.reset_meters = c.reset_dataloader = true;
    fairseq_log("fairseq.checkpoint_utils", "loading pretrained model from " + c.finetune_from_model +
                                                ": optimizer, lr scheduler, meters, dataloader will be reset");
    return c.finetune_from_model;
  }
  if (c.restore_file == kDefaultRestoreFile) {
    const std::string p = ckpt_path(c, kDefaultRestoreFile);
    return fs::exists(p) ? p : std::string();
  }
  const std::string file = with_suffix(c.restore_file, c.checkpoint_suffix);  // fairseq's replace, as given
  if (fs::exists(file)) return file;
  if (fs::exists(ckpt_path(c, c.restore_file))) return ckpt_path(c, c.restore_file);
  fail_input(file, "--restore-file not found (also not in --save-dir " + c.save_dir + ")" +
                       (c.checkpoint_suffix.empty() ? "" : " (the name with --checkpoint-suffix " + c.checkpoint_suffix + ")"),
             "give the path of a checkpoint written by `stretch train`, or leave --restore-file out to start afresh");
}

// One training run: the state and the steps of fairseq_cli/train.py's main loop, each a method.
class TrainingRun {
 public:
  explicit TrainingRun(TrainConfig config);
  int run();

 private:
  void resume(const std::string& from);
  // Writes the checkpoint under `names` (the first written, the others linked); `epoch` and `score`
  // (the validation loss, NaN: none) for the log line.
  void save(const std::vector<std::string>& names, int64_t epoch, double score);
  double run_validation();
  bool validate_and_save(bool end_of_epoch);
  bool out_of_patience(double vloss);
  // The best-checkpoint comparison (fairseq's is_better without ties: the metric ranks as the loss).
  bool better(double a, double b) const { return c_.maximize_best_checkpoint_metric ? a > b : a < b; }
  KeepBestParams keep_best_params() const {
    return {.save_dir = c_.save_dir, .metric = c_.best_checkpoint_metric, .maximize = c_.maximize_best_checkpoint_metric,
            .keep = c_.keep_best_checkpoints, .suffix = c_.checkpoint_suffix};
  }
  void after_update(const UpdateResult& r, double step_seconds, int64_t done);
  int stop_requested();
  Stats epoch_stats() const;
  void print_epoch_summary(const Stats& stats);
  double lr_now() const { return scheduler_->lr_at_epoch(state_.num_updates, state_.epoch); }

  TrainConfig c_;
  const dist::World& world_;
  // --ddp-backend pytorch_ddp/c10d with more than one process: gradients summed in buckets
  // during backward (train/update.h step 2); null otherwise.
  std::unique_ptr<dist::BucketAllreduce> buckets_;
  LmData data_;
  std::unique_ptr<LmSplit> train_split_;
  std::vector<std::pair<std::string, std::unique_ptr<LmSplit>>> valid_splits_;  // --valid-subset a,b
  double patience_best_ = NAN;  // fairseq's should_stop_early: best validation loss of this process
  double first_valid_loss_ = NAN;  // this process's first validation loss (the explosion warning's reference)
  // One warning when a validation loss is non-finite or over 10x the initial one, naming the likely
  // causes from the settings (lr, warmup, clipping, bf16); training goes on (fairseq says nothing).
  // The initial loss is the lower of the first validation's and log2(V), a uniform prediction's,
  // which a freshly initialised model is close to (so an explosion before the first validation counts).
  void warn_if_exploding(double loss2) {
    const double uniform = std::log2(static_cast<double>(std::max<int64_t>(data_.vocab_size, 2)));
    if (std::isnan(first_valid_loss_) && std::isfinite(loss2)) first_valid_loss_ = std::min(loss2, uniform);
    if (std::isfinite(loss2) && !(loss2 > 10 * std::min(first_valid_loss_, uniform))) return;
    const OptimSettings& o = c_.optim;
    std::string causes;
    const double lr = o.lr.empty() ? 0.0 : o.lr.front();
    causes += "--lr " + python_float_repr(lr) + " may be too high for --optimizer " +
              std::string(optim::optimizer_kind_name(o.optimizer));
    if (o.warmup_updates == 0) causes += "; there is no warmup (--warmup-updates 0)";
    if (o.clip_norm <= 0) causes += "; gradients are not clipped (--clip-norm 0)";
    if (ops::matmul_precision() == ops::GemmPrecision::Bf16) causes += "; matrix products run in bf16 (--bf16/--fp16)";
    log_once(LogLevel::Warning,
             "the validation loss exploded: " + (std::isfinite(loss2) ? format_stat(loss2, 3) : std::string(std::isnan(loss2) ? "nan" : "inf")) +
                 " at update " + std::to_string(state_.num_updates) + ", over 10x the initial " +
                 format_stat(std::isnan(first_valid_loss_) ? uniform : first_valid_loss_, 3) +
                 " (the first validation's, at most log2 of the vocabulary size)" +
                 ". Likely causes: " + causes + ". Lower --lr, add --warmup-updates, or set --clip-norm");
  }
  int64_t patience_runs_ = 0;   // validations since it improved
  std::unique_ptr<models::LanguageModel> model_;
  std::unique_ptr<models::SegmentState> segment_;
  std::string dictionary_text_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> scheduler_;
  TrainState state_;
  Ema ema_;  // --store-ema (train/ema.h)
  nlohmann::json config_json_;
  TrainClock clock_;
  Progress progress_;
  double t_start_ = 0, epoch_t0_ = 0;  // this process's start of training and of the epoch in progress
  int64_t nan_in_a_row_ = 0, save_count_ = 0;
  // Running sums for the log interval (fairseq's "train_inner" meters).
  double log_loss_ = 0, log_tokens_ = 0, log_gnorm_ = 0, log_clip_ = 0, log_bsz_ = 0, log_t0_ = 0, log_train_wall_ = 0;
  int64_t log_updates_ = 0;
  std::vector<std::pair<std::string, double>> log_metrics_;  // the family's train_metrics(), summed over the interval
};

// The batches of an epoch of `nb` (this shard's) that training consumes. fairseq 0.12.2's
// --skip-remainder-batch: EpochBatchIterator takes len(batch_sampler) − 1 batches (its "lazy
// implementation": the last one goes even when full; the count is the global one, so with several
// shards, each no longer than it, nothing goes there), then GroupedIterator keeps ⌊n / update_freq⌋
// whole groups.
int64_t epoch_batches_used(int64_t nb, int64_t update_freq, bool skip_remainder_batch, int shard_count) {
  if (!skip_remainder_batch) return nb;
  const int64_t taken = shard_count == 1 ? std::max<int64_t>(nb - 1, 0) : nb;
  return taken / update_freq * update_freq;
}

// The groups of --update-freq batches of an epoch of `nb` batches (fairseq's GroupedIterator length),
// and how many of them `next_batch` has consumed.
int64_t groups_of(int64_t batches, int64_t update_freq) { return (batches + update_freq - 1) / update_freq; }

void check_run_flags(const TrainConfig& c) {
  // Before the --save-dir is made (open_lm_split says the same for a library caller).
  if (!(c.ema.decay >= 0 && c.ema.decay <= 1))
    fail_usage("--ema-decay " + python_float_repr(c.ema.decay) + " is not allowed: the decay must be in [0, 1]",
               "fairseq's default is 0.9999");
  if (!c.ema.seed_model.empty())
    fail_usage("--ema-seed-model " + c.ema.seed_model + " is not supported: stretch's average starts from the weights "
                   "(or from the ema.* tensors of the checkpoint it resumes)",
               "leave --ema-seed-model out; to start the average from another run's, resume from that run's checkpoint");
  if (c.model.value("add_bos_token", false) && parse_lm_task(c.task) != LmTask::LanguageModeling)
    fail_usage("--add-bos-token has no meaning with --task " + c.task +
                   " (fairseq's flag belongs to the language_modeling task)",
               "drop it, or train with --task language_modeling");
  if (c.model.value("add_bos_token", false) && c.model.value("pos", std::string()) == "learned" &&
      c.model.value("max_target_positions", int64_t{0}) < c.tokens_per_sample + 1)
    fail_usage("--add-bos-token makes rows of --tokens-per-sample + 1 = " + std::to_string(c.tokens_per_sample + 1) +
                   " tokens, past the learned-position table (--max-target-positions " +
                   std::to_string(c.model.value("max_target_positions", int64_t{0})) + ")",
               "give --max-target-positions " + std::to_string(c.tokens_per_sample + 1) +
                   " (fairseq's rows are as long; its table would overflow the same way)");
  if (parse_lm_task(c.task) == LmTask::TruncatedBptt) {
    // fairseq's TruncatedBPTTLMTask batches by --batch-size only (dataset.batch_size streams).
    if (c.batch_size <= 0)
      fail_usage("--task truncated_bptt_lm needs --batch-size (the number of parallel streams per process)",
                 "e.g. --batch-size 22 (Transformer-XL's enwik8 script); --max-tokens has no meaning for this task");
    if (c.max_tokens > 0) log_once(LogLevel::Info, "--max-tokens has no effect with --task truncated_bptt_lm (batches are --batch-size streams)");
  } else if (c.max_tokens <= 0 && c.batch_size <= 0)
    fail_usage("train: give --max-tokens or --batch-size", "e.g. --max-tokens 4096 (fairseq's usual choice)");
  if (parse_lm_task(c.task) == LmTask::LanguageModeling && c.max_tokens > 0 && c.max_tokens < c.tokens_per_sample)
    fail_usage("--max-tokens " + std::to_string(c.max_tokens) + " is smaller than --tokens-per-sample " +
                   std::to_string(c.tokens_per_sample),
               "raise --max-tokens or lower --tokens-per-sample");
  if (c.update_freq < 1) fail_usage("--update-freq must be >= 1, got " + std::to_string(c.update_freq));
  if (c.log_interval < 1) fail_usage("--log-interval must be >= 1, got " + std::to_string(c.log_interval));
  if (c.max_consecutive_nan < 1)
    fail_usage("--max-consecutive-nan must be >= 1, got " + std::to_string(c.max_consecutive_nan));
}

TrainingRun::TrainingRun(TrainConfig config)
    : c_(std::move(config)), world_(dist::World::get()), progress_(c_.log_format, c_.log_interval, c_.log_full_precision) {
  const TrainConfig& c = c_;
  if (!c.tensorboard_logdir.empty() && world_.is_main())
    progress_.set_tensorboard(std::make_unique<TensorboardWriter>(c.tensorboard_logdir));
  const LmTask task = parse_lm_task(c.task);
  // An encoder learns from masked tokens, a decoder from the next token: the task follows the family.
  const std::string family = models::family_of_config(c.model, "--arch").name;
  if ((family == "roberta") != (task == LmTask::MaskedLm))
    fail_usage("--task " + c.task + " cannot train --arch " + c.model.value("arch", std::string()) + " (family " +
                   family + ")",
               family == "roberta" ? "the roberta encoder trains with --task masked_lm"
                                   : "--task masked_lm needs an encoder: --arch roberta_base, roberta_small or roberta_tiny");
  data_ = task == LmTask::MaskedLm ? open_masked_lm_data(c.data) : open_lm_data(c.data);
  c_.model["vocab_size"] = data_.vocab_size;
  c_.model["padding_idx"] = data_.pad;
  LmSplitOptions train_opts{.tokens_per_sample = c.tokens_per_sample,
                            .sample_break_mode = c.sample_break_mode,
                            .max_tokens = c.max_tokens,
                            .batch_size = c.batch_size,
                            .required_batch_size_multiple = c.required_batch_size_multiple,
                            .seed = c.seed,
                            .shuffle = true,
                            .shard_rank = world_.rank(),
                            .shard_count = world_.size(),
                            .task = task,
                            .bptt_order = c.bptt_order,
                            .mask = c.mask,
                            .add_bos_token = c.model.value("add_bos_token", false),
                            .shorten_method = c.shorten_method,
                            .shorten_data_split_list = c.shorten_data_split_list};
  train_split_ = open_lm_split(c.data, c.train_subset, data_, train_opts);
  if (!c.disable_validation) {
    LmSplitOptions vo = train_opts;
    vo.shuffle = false;
    if (c.max_tokens_valid > 0) vo.max_tokens = c.max_tokens_valid;
    if (c.batch_size_valid > 0) vo.batch_size = c.batch_size_valid;
    // fairseq's truncated_bptt_lm builds every split's TruncatedBPTTDataset with task.batch_size
    // (--batch-size): its batch iterator ignores --batch-size-valid, and the adaptive_span
    // decoder's one cache needs the same streams in training and validation.
    if (task == LmTask::TruncatedBptt && c.batch_size_valid > 0 && c.batch_size_valid != c.batch_size) {
      if (world_.is_main())
        log_once(LogLevel::Info, "--batch-size-valid " + std::to_string(c.batch_size_valid) +
                                     " has no effect with --task truncated_bptt_lm (as in fairseq): validation "
                                     "runs --batch-size " + std::to_string(c.batch_size) + " streams");
      vo.batch_size = train_opts.batch_size;
    }
    for (const std::string& subset : split_subsets(c.valid_subset))
      valid_splits_.emplace_back(subset, open_lm_split(c.data, subset, data_, vo));
  }
  check_training_memory(c.model);  // before allocating: a bad_alloc after minutes otherwise
  model_ = models::build_model(c.model);
  if (c.checkpoint_activations && !model_->can_recompute_activations())
    fail_usage("--checkpoint-activations is not implemented for --arch " + c.model.value("arch", std::string()) +
                   " (family " + family + ")",
               "drop the flag; it is implemented for the transformer_lm and roberta families (docs/architecture.md "
               "\"Activation checkpointing\")");
  model_->init(c.seed);
  segment_ = model_->new_segment_state(models::SegmentUse::Training);
  dictionary_text_ = read_text_file(data_.dict_path);
  optimizer_ = make_optimizer(c.optim);
  scheduler_ = make_scheduler(c);
  state_.seed = c.seed;
  config_json_ = c.to_json();
  if (world_.is_main()) {
    // What fairseq_cli/train.py logs at the start: the configuration, the model, the devices.
    fairseq_log("fairseq_cli.train", config_json_.dump());
    fairseq_log("fairseq_cli.train", std::string("task: ") + (train_opts.task == LmTask::TruncatedBptt ? "TruncatedBPTTLMTask"
                                                              : train_opts.task == LmTask::MaskedLm    ? "MaskedLMTask"
                                                                                                       : "LanguageModelingTask"));
    fairseq_log("fairseq_cli.train", "model: " + model_->info().summary);
    fairseq_log("fairseq_cli.train", "num. shared model params: " + with_commas(model_->params().numel()) +
                                         " (num. trained: " + with_commas(model_->params().numel()) + ")");
    fairseq_log("fairseq_cli.train", "training on " + std::to_string(world_.size()) + " devices (CPU processes)");
    fairseq_log("fairseq_cli.train",
                "max tokens per device = " + (c.max_tokens > 0 ? std::to_string(c.max_tokens) : std::string("None")) +
                    " and max sentences per device = " +
                    (c.batch_size > 0 ? std::to_string(c.batch_size) : std::string("None")));
  }
  ema_.set_last_decay(c.ema.decay);  // fairseq's EMA.decay before its first step
  if (const std::string from = restore_path(c_); !from.empty()) {
    resume(from);
  } else if (world_.is_main()) {
    fairseq_log("fairseq.trainer", "No existing checkpoint found " + ckpt_path(c, kDefaultRestoreFile));
  }
  state_.bf16_products = settle_bf16_products(state_.bf16_products, world_);
  if (world_.is_main() && ops::matmul_precision() == ops::GemmPrecision::Bf16)
    log_info("bf16 matrix products (fp32 accumulation); weights, optimizer state and checkpoints in fp32");
  if (world_.is_main() && data_.byte_level)
    log_info("byte-level dictionary (" + data_.dict_path + "): the logged loss (base 2) is bits per byte, the bpc of "
             "enwik8 results" + (train_opts.task == LmTask::TruncatedBptt
                                     ? std::string(" (divided by B·T as fairseq's truncated_bptt_lm does: the "
                                                   "unscored last position of each block counts; eval-lm gives "
                                                   "the exact figure)")
                                     : std::string()));
  if (world_.is_main())
    log_info("model " + model_->info().summary + ": " + std::to_string(model_->params().numel()) +
             " parameters, vocabulary " + std::to_string(data_.vocab_size));
}

void TrainingRun::resume(const std::string& from) {
  const TrainConfig& c = c_;
  CheckpointContents ck;
  try {
    if (c.reset_optimizer && c.reset_dataloader) {
      // Everything but the weights starts afresh: a model file without training state will do.
      static_cast<models::ModelFile&>(ck) = models::read_model_file(from);
      if (ck.format == models::kCheckpointFormat) ck = read_checkpoint(from);
      else ck.state.seed = c.seed;
    } else {
      ck = read_checkpoint(from);
    }
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("cannot resume: ") + e.what(),
                "move " + from + " away to start afresh, or copy an earlier checkpoint (checkpoint_E_U.pt, "
                "checkpointN.pt) over it");
  }
  if (ck.format == models::kFairseqFormat) {
    // A fairseq .pt (weights only: converted in memory by models/fairseq). fairseq stores no
    // dictionary: the vocabulary size is checked (as fairseq's load_state_dict does), and the
    // architecture below. Its optimizer and data state are not imported (docs/fairseq.md).
    const int64_t saved_v = ck.model.value("vocab_size", int64_t{-1});
    if (saved_v != data_.vocab_size)
      fail_input(from, "has a vocabulary of " + std::to_string(saved_v) + " but " + data_.dict_path + " has " +
                           std::to_string(data_.vocab_size) + " symbols",
                 "fine-tune on the data-bin (dict.txt) the fairseq model was trained on");
    log_info(from + ": fairseq weights only (fairseq stores no dictionary: the vocabulary size " +
             std::to_string(saved_v) + " matches); optimizer, lr schedule, num_updates and data position start afresh");
  } else if (ck.dict_hash != data_.dict_hash) {
    fail_input(from, "was trained with another dictionary (hash " + ck.dict_hash + "; " + data_.dict_path + " has " +
                         data_.dict_hash + ")",
               "use a fresh --save-dir, or the data-bin the checkpoint was trained on");
  }
  check_same_architecture(from, ck.model, model_->config_json());
  models::load_weights(*model_, ck);
  if (segment_) segment_->load(segment_tensors(ck));
  if (c.ema.store) {  // fairseq's trainer.load_checkpoint: also under --reset-optimizer and --finetune-from-model
    if (world_.is_main()) fairseq_log("root", "Copying EMA model to device cpu");
    if (ema_.load(ck.file.tensors, optim_params(*model_), from)) {
      if (world_.is_main()) fairseq_log("fairseq.trainer", "Loading EMA from checkpoint");
    } else {
      if (world_.is_main())
        log_warning(from + " holds no EMA (" +
                    (ck.format == models::kFairseqFormat ? std::string("a fairseq .pt's extra_state['ema'] is not imported")
                                                         : std::string("it was written without --store-ema")) +
                    "): the average starts from its weights, as fairseq's \"EMA is re-initialized from checkpoint\"");
      ema_.seed_from(optim_params(*model_));
    }
  }
  state_ = ck.state;
  clock_ = ck.clock;
  // fairseq's exact semantics (trainer.load_checkpoint, checkpoint_utils.load_checkpoint):
  // --reset-optimizer: the optimizer state and num_updates are not restored (num_updates starts at
  //   0, so the schedule and --max-update count from 0), and neither is the best validation loss;
  // --reset-dataloader: epoch 1, batch 0; --reset-meters: the best loss and the epoch's meters go.
  // A checkpoint written with --no-save-optimizer-state gets the same: fairseq's
  // trainer.load_checkpoint restores the optimizer, num_updates and the scheduler only under its
  // "last_optimizer_state is not None" branch; the best loss and the data position still come back.
  const bool no_optimizer_state = ck.format == models::kCheckpointFormat && ck.optimizer_scalars.is_null();
  if (no_optimizer_state && !c.reset_optimizer)
    log_warning(from + " was saved with --no-save-optimizer-state: the optimizer and num_updates start afresh (the "
                "schedule from update 0, as fairseq does); the weights, best loss and data position are restored");
  const bool fresh_optimizer = c.reset_optimizer || no_optimizer_state;
  if (fresh_optimizer) {  // a new run on these weights: it updates from 0 and makes its own bf16 choice
    state_.num_updates = state_.ema_update_counter = 0;
    state_.bf16_products.clear();
  }
  if (c.reset_optimizer) state_.best_loss = NAN;
  if (state_.seed != c.seed)
    log_warning("resuming a run started with --seed " + std::to_string(state_.seed) + " with --seed " +
                std::to_string(c.seed) + ": later batches and dropout masks differ from an uninterrupted run");
  state_.seed = c.seed;
  if (c.reset_dataloader) {
    state_.epoch = 0;
    state_.begin_next_epoch();  // epoch 1, batch 0
    clock_.epoch_train_wall = clock_.epoch_elapsed = 0;
  }
  if (c.reset_meters) {
    state_.best_loss = NAN;
    clock_ = TrainClock{};
  }
  // reduce_lr_on_plateau: --reset-optimizer drops the reduced lr and the scheduler state (fairseq
  // loads neither), --reset-lr-scheduler the scheduler's best and epoch count (the lr stays).
  if (fresh_optimizer) {
    state_.lr_plateau = optim::PlateauState{};
  } else if (c.reset_lr_scheduler) {
    state_.lr_plateau = optim::PlateauState{.lr = state_.lr_plateau.lr};
  }
  scheduler_->set_plateau(state_.lr_plateau);
  if (!fresh_optimizer) {
    optim::OptimizerState os;
    for (const auto& [name, t] : ck.file.tensors)
      if (name.rfind("optimizer.", 0) == 0) os.tensors.emplace_back(name.substr(10), t);
    os.scalars = ck.optimizer_scalars;
    os.source = from;
    optimizer_->load_state_dict(os, optim_params(*model_));
  }
  if (world_.is_main()) {
    log_info("resumed from " + from + " at update " + std::to_string(state_.num_updates) + ", epoch " +
             std::to_string(state_.epoch) + ", batch " + std::to_string(state_.next_batch));
    fairseq_log("fairseq.trainer", "Loaded checkpoint " + from + " (epoch " + std::to_string(state_.epoch) + " @ " +
                                       std::to_string(state_.num_updates) + " updates)");
  }
}

void TrainingRun::save(const std::vector<std::string>& names, int64_t epoch, double score) {
  const TrainConfig& c = c_;
  if (c.no_save || !world_.is_main() || names.empty()) return;
  const double t0 = now_seconds();
  clock_.epoch_elapsed += t0 - epoch_t0_;  // the clock as of now, in the file
  epoch_t0_ = t0;
  std::error_code ec;
  fs::create_directories(c.save_dir, ec);
  if (ec) fail_io(c.save_dir, "cannot create the --save-dir: " + ec.message(), "choose a writable --save-dir");
  // Write once, then publish the finished file under the other names (each atomic too).
  const std::string first = ckpt_path(c, names.front());
  test_hooks::before_checkpoint_save(++save_count_);
  try {
    save_checkpoint(first, *model_,
                    {.config = config_json_,
                     .dict_hash = data_.dict_hash,
                     .dictionary = dictionary_text_,
                     .state = state_,
                     .clock = clock_,
                     .optimizer = c.no_save_optimizer_state ? nullptr : optimizer_.get(),
                     .segment = segment_.get(),
                     .ema = c.ema.store ? ema_.save(optim_params(*model_)) : NamedTensors{}});
  } catch (...) {
    test_hooks::after_checkpoint_save();
    throw;
  }
  test_hooks::after_checkpoint_save();
  for (size_t i = 1; i < names.size(); ++i) publish_copy(first, ckpt_path(c, names[i]));
  // fairseq's checkpoint_utils.save_checkpoint line; the score is the logged (rounded) validation loss.
  fairseq_log("fairseq.checkpoint_utils",
              "Saved checkpoint " + first + " (epoch " + std::to_string(epoch) + " @ " +
                  std::to_string(state_.num_updates) + " updates, score " +
                  (std::isnan(score) ? std::string("None") : python_float_repr(std::stod(format_stat(score, 3)))) +
                  ") (writing took " + python_float_repr(now_seconds() - t0) + " seconds)");
  prune(c);
  prune_best(keep_best_params());
}

// Validates every --valid-subset (logging fairseq's valid_* fields); returns the first subset's
// loss, or NaN when there is no validation. state.best_loss follows fairseq's
// save_checkpoint.best (a minimum, a maximum with --maximize-best-checkpoint-metric), tracked on
// the first subset only, as fairseq's get_valid_stats does.
double TrainingRun::run_validation() {
  if (valid_splits_.empty()) return NAN;
  const TrainConfig& c = c_;
  const bool ppl_metric = c.best_checkpoint_metric == "ppl";
  double first = NAN;
  for (size_t k = 0; k < valid_splits_.size(); ++k) {
    const std::string& subset = valid_splits_[k].first;
    if (world_.is_main()) progress_.info("fairseq_cli.train", "begin validation on \"" + subset + "\" subset");
    models::SegmentState* shared = model_->validation_shares_segment_state() ? segment_.get() : nullptr;
    const ValidResult v = validate(*model_, *valid_splits_[k].second, world_, c.max_valid_steps, shared);
    const double prev_best = state_.best_loss;
    // The validation "loss" fairseq reports, tracks as the best and passes to --patience: per row
    // with --sentence-avg (the same ranking on a fixed split).
    const Stats loss_fields =
        loss_stats(v.loss2 * kLn2 * static_cast<double>(v.ntokens), static_cast<double>(v.ntokens),
                   static_cast<double>(v.nsentences), c.optim.sentence_avg);
    const double reported = loss_fields.front().value;
    if (k == 0) {
      first = reported;
      warn_if_exploding(v.loss2);
      if (std::isnan(state_.best_loss) || better(reported, state_.best_loss)) state_.best_loss = reported;
    }
    if (!world_.is_main()) continue;
    const double batches = std::max(v.batches, 1.0);
    Stats st = loss_fields;
    st.insert(st.end(), {{"wps", static_cast<double>(v.ntokens) / std::max(v.seconds, 1e-9), 1},
                {"wpb", static_cast<double>(v.ntokens) / batches, 1},
                {"bsz", static_cast<double>(v.nsentences) / batches, 1},
                {"num_updates", static_cast<double>(state_.num_updates), -1}});
    for (const auto& [key, mean] : v.metrics) st.push_back({key, mean, 3});  // fairseq's valid_avg_span, valid_max_span
    // fairseq adds best_<metric> once a checkpoint has recorded a best (not on the first validation).
    if (k == 0 && !std::isnan(prev_best)) {
      const double b = better(reported, prev_best) ? reported : prev_best;
      st.push_back(ppl_metric ? Stat{"best_ppl", std::pow(2.0, b), 2} : Stat{"best_loss", b, 3});
    }
    progress_.print(subset, "valid on '" + subset + "' subset", st);
  }
  return first;
}

// fairseq's should_stop_early: --patience validations in a row without a strictly better loss.
bool TrainingRun::out_of_patience(double vloss) {
  if (std::isnan(vloss) || c_.patience <= 0) return false;
  const bool improved = c_.maximize_best_checkpoint_metric ? vloss > patience_best_ : vloss < patience_best_;
  if (std::isnan(patience_best_) || improved) {
    patience_best_ = vloss;
    patience_runs_ = 0;
    return false;
  }
  if (++patience_runs_ < c_.patience) return false;
  if (world_.is_main())
    progress_.info("fairseq_cli.train", "early stop since valid performance hasn't improved for last " +
                                            std::to_string(c_.patience) + " runs");
  return true;
}

// fairseq's validate_and_save: decides whether to validate and which files to write after
// an update; at the end of an epoch it also moves the state to the next epoch (before the
// save, so a resume from that checkpoint starts the next epoch). Returns "stop training".
bool TrainingRun::validate_and_save(bool end_of_epoch) {
  const TrainConfig& c = c_;
  const int64_t n = state_.num_updates, epoch = state_.epoch;
  bool should_stop = c.max_update > 0 && n >= c.max_update;
  const double hours = clock_.train_wall / 3600.0;
  const bool out_of_time = c.stop_time_hours > 0 && hours > c.stop_time_hours;
  if (out_of_time && world_.is_main())
    progress_.info("fairseq_cli.train", "Stopping training due to cumulative_training_time: " + python_float_repr(hours) +
                                            " > stop_time_hours: " + python_float_repr(c.stop_time_hours) + " hour(s)");
  should_stop = should_stop || out_of_time;
  const bool after = n >= c.validate_after_updates;
  const bool interval_save = c.save_interval_updates > 0 && n > 0 && n % c.save_interval_updates == 0 && after;
  const bool do_save = (end_of_epoch && epoch % c.save_interval == 0) || should_stop || interval_save;
  const bool do_validate = !c.disable_validation &&
                           ((!end_of_epoch && do_save) || (end_of_epoch && epoch % c.validate_interval == 0) ||
                            should_stop ||
                            (c.validate_interval_updates > 0 && n > 0 && n % c.validate_interval_updates == 0)) &&
                           after;
  if (c.max_update > 0 && n >= c.max_update && world_.is_main())
    progress_.info("fairseq_cli.train", "Stopping training due to num_updates: " + std::to_string(n) +
                                            " >= max_update: " + std::to_string(c.max_update));
  const double prev_best = state_.best_loss;
  const double vloss = do_validate ? run_validation() : NAN;
  std::vector<std::string> names;
  if (end_of_epoch && !c.no_epoch_checkpoints && epoch % c.save_interval == 0)
    names.push_back("checkpoint" + std::to_string(epoch) + ".pt");
  if (!end_of_epoch && interval_save)
    names.push_back("checkpoint_" + std::to_string(epoch) + "_" + std::to_string(n) + ".pt");
  if (!std::isnan(vloss) && (std::isnan(prev_best) || vloss == prev_best || better(vloss, prev_best)))
    names.push_back("checkpoint_best.pt");
  if (!c.no_last_checkpoints) names.push_back("checkpoint_last.pt");
  // fairseq names the file by the logged (rounded) metric value (train/best_checkpoints.h).
  const bool ppl = c.best_checkpoint_metric == "ppl";
  auto logged = [&](double loss2) {  // Python's round(v, 3) (ppl: round(2^loss, 2))
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", ppl ? 2 : 3, ppl ? std::pow(2.0, loss2) : loss2);
    return std::strtod(buf, nullptr);
  };
  if (c.keep_best_checkpoints > 0 && !std::isnan(vloss)) {
    const std::string best_name = keep_best_name(keep_best_params(), epoch, n, logged(vloss), logged(state_.best_loss));
    if (!best_name.empty()) names.insert(names.end() - (c.no_last_checkpoints ? 0 : 1), best_name);
  }
  const bool early = out_of_patience(vloss);
  should_stop = should_stop || early;
  if (end_of_epoch && !should_stop) {
    // fairseq's trainer.lr_step(epoch, valid_losses[0]) after an epoch that does not stop the run.
    // fairseq calls it after this save, so its checkpoint misses the epoch's reduction (a resume
    // from it differs); stretch steps before the save, so the resume equals the uninterrupted run.
    const bool validated = do_validate && !valid_splits_.empty();
    scheduler_->step_epoch(epoch, validated ? std::optional<double>(logged(vloss)) : std::nullopt, n);
    state_.lr_plateau = scheduler_->plateau();
  }
  if (end_of_epoch) {
    state_.begin_next_epoch();
    clock_.epoch_train_wall = clock_.epoch_elapsed = 0;
    epoch_t0_ = now_seconds();
  }
  if (do_save || should_stop) save(names, epoch, vloss);
  return should_stop;
}

// Bookkeeping of an applied update: epoch and interval sums (fairseq's "train" and "train_inner"
// meters), the bar, the train_inner line every --log-interval updates.
void TrainingRun::after_update(const UpdateResult& r, double step_seconds, int64_t done) {
  const TrainConfig& c = c_;
  nan_in_a_row_ = 0;
  const double clipped = (c.optim.clip_norm > 0 && r.gnorm > c.optim.clip_norm) ? 1.0 : 0.0;
  state_.epoch_loss_sum += r.loss_sum;
  state_.epoch_ntokens += r.ntokens;
  state_.epoch_nsentences += r.nsentences;
  state_.epoch_gnorm_sum += r.gnorm;
  state_.epoch_clip_count += clipped;
  state_.epoch_updates += 1;
  clock_.train_wall += step_seconds;
  clock_.epoch_train_wall += step_seconds;
  log_loss_ += r.loss_sum;
  log_tokens_ += r.ntokens;
  log_bsz_ += r.nsentences;
  log_gnorm_ += r.gnorm;
  log_clip_ += clipped;
  log_train_wall_ += step_seconds;
  ++log_updates_;
  const auto metrics = model_->train_metrics();  // e.g. Adaptive Span's avg_span, max_span
  if (log_metrics_.size() != metrics.size()) log_metrics_.assign(metrics.begin(), metrics.end());
  else
    for (size_t i = 0; i < metrics.size(); ++i) log_metrics_[i].second += metrics[i].second;
  auto& epoch_metrics = state_.epoch_metric_sums;
  if (epoch_metrics.size() != metrics.size()) epoch_metrics.assign(metrics.begin(), metrics.end());
  else
    for (size_t i = 0; i < metrics.size(); ++i) epoch_metrics[i].second += metrics[i].second;
  if (!world_.is_main()) return;
  progress_.step(done);
  if (state_.num_updates % c.log_interval != 0) return;
  const double dt = std::max(now_seconds() - log_t0_, 1e-9);
  const double updates = static_cast<double>(log_updates_);
  Stats st = loss_stats(log_loss_, log_tokens_, log_bsz_, c.optim.sentence_avg);
  st.insert(st.end(), {{"wps", log_tokens_ / dt, 1},
              {"ups", updates / dt, 2},
              {"wpb", log_tokens_ / updates, 1},
              {"bsz", log_bsz_ / updates, 1},
              {"num_updates", static_cast<double>(state_.num_updates), -1},
              {"lr", lr_now(), -1},
              {"gnorm", log_gnorm_ / updates, 3}});
  if (c.optim.clip_norm > 0) st.push_back({"clip", 100.0 * log_clip_ / updates, 1});
  for (const auto& [key, sum] : log_metrics_) st.push_back({key, sum / updates, 3});
  log_metrics_.clear();
  st.push_back({"train_wall", log_train_wall_, 0});
  if (c.ema.store) st.push_back({"ema_decay", ema_.last_decay(), 5});  // where fairseq-train prints it
  st.push_back({"wall", now_seconds() - t_start_, 0});
  progress_.log(st, done, state_.num_updates);
  log_loss_ = log_tokens_ = log_gnorm_ = log_clip_ = log_bsz_ = log_train_wall_ = 0;
  log_updates_ = 0;
  log_t0_ = now_seconds();
}

// A stop signal on any rank: save checkpoint_last.pt; returns the exit code (0: go on). Every
// rank stops at the same update (a signal may reach only some of them).
int TrainingRun::stop_requested() {
  int sig = stop_signal();
  if (world_.size() > 1) {
    double s = sig;
    world_.allreduce_sum(&s, 1);
    sig = s > 0 ? (sig != 0 ? sig : SIGTERM) : 0;
  }
  if (sig == 0) return 0;
  log_warning("received signal " + std::to_string(sig) + ": saving " + ckpt_path(c_, "checkpoint_last.pt") +
              " and stopping");
  save({"checkpoint_last.pt"}, state_.epoch, NAN);
  return 128 + sig;
}

// fairseq's end-of-epoch "train" line: the epoch's meters (also when a run stops mid-epoch).
Stats TrainingRun::epoch_stats() const {
  const double updates = static_cast<double>(std::max<int64_t>(state_.epoch_updates, 1));
  const double elapsed = std::max(clock_.epoch_elapsed + now_seconds() - epoch_t0_, 1e-9);
  Stats st = loss_stats(state_.epoch_loss_sum, state_.epoch_ntokens, state_.epoch_nsentences, c_.optim.sentence_avg);
  st.insert(st.end(), {{"wps", state_.epoch_ntokens / elapsed, 1},
              {"ups", static_cast<double>(state_.epoch_updates) / elapsed, 2},
              {"wpb", state_.epoch_ntokens / updates, 1},
              {"bsz", state_.epoch_nsentences / updates, 1},
              {"num_updates", static_cast<double>(state_.num_updates), -1},
              {"lr", lr_now(), -1},
              {"gnorm", state_.epoch_gnorm_sum / updates, 3}});
  if (c_.optim.clip_norm > 0) st.push_back({"clip", 100.0 * state_.epoch_clip_count / updates, 1});
  for (const auto& [key, sum] : state_.epoch_metric_sums) st.push_back({key, sum / updates, 3});  // train_avg_span ...
  st.push_back({"train_wall", clock_.epoch_train_wall, 0});
  if (c_.ema.store) st.push_back({"ema_decay", ema_.last_decay(), 5});
  st.push_back({"wall", now_seconds() - t_start_, 0});
  return st;
}

void TrainingRun::print_epoch_summary(const Stats& stats) {
  if (!world_.is_main()) return;
  progress_.end_epoch();
  progress_.info("fairseq_cli.train", "end of epoch " + std::to_string(progress_.epoch()) + " (average epoch stats below)");
  progress_.print("train", "", stats);
}

int TrainingRun::run() {
  const TrainConfig& c = c_;
  if (world_.size() > 1 && ddp_overlaps(c.ddp_backend))
    buckets_ = std::make_unique<dist::BucketAllreduce>(world_, grad_slices(*model_), c.bucket_cap_mb * 1024 * 1024);
  const UpdateParams update_params{.clip_norm = c.optim.clip_norm,
                                   .seed = c.seed,
                                   .pad = data_.pad,
                                   .sentence_avg = c.optim.sentence_avg,
                                   .activations = c.checkpoint_activations ? autograd::Activations::Recompute
                                                                           : autograd::Activations::Keep,
                                   .buckets = buckets_.get()};
  t_start_ = log_t0_ = now_seconds();
  bool stop = c.max_update > 0 && state_.num_updates >= c.max_update;
  if (stop && world_.is_main())
    log_warning("nothing to train: the run is at update " + std::to_string(state_.num_updates) + " >= --max-update " +
                std::to_string(c.max_update) +
                " (to train a restored model further, raise --max-update or pass --reset-optimizer, which restarts "
                "the update count at 0 as in fairseq)");
  int exit_code = 0;
  while (!stop && exit_code == 0) {
    if (c.max_epoch > 0 && state_.epoch > c.max_epoch) break;
    if (c.optim.stop_min_lr >= 0 && lr_now() <= c.optim.stop_min_lr) {
      log_info("stopping: learning rate " + std::to_string(lr_now()) + " <= --stop-min-lr " +
               std::to_string(c.optim.stop_min_lr));
      if (world_.is_main())
        progress_.info("fairseq_cli.train", "stopping training because current learning rate (" +
                                                python_float_repr(lr_now()) +
                                                ") is smaller than or equal to minimum learning rate (--stop-min-lr=" +
                                                python_float_repr(c.optim.stop_min_lr) + ")");
      break;
    }
    train_split_->set_epoch(state_.epoch, /*shuffle=*/state_.epoch > c.curriculum);  // fairseq's --curriculum
    const int64_t nb_all = train_split_->num_batches();
    const int64_t nb = epoch_batches_used(nb_all, c.update_freq, c.skip_remainder_batch, world_.size());
    if (c.skip_remainder_batch && nb == 0)
      fail_usage("--skip-remainder-batch leaves no batch to train on in epoch " + std::to_string(state_.epoch) + " (" +
                     std::to_string(nb_all) + " batches, --update-freq " + std::to_string(c.update_freq) + ")",
                 "lower --update-freq or --max-tokens / --batch-size, or leave --skip-remainder-batch out");
    if (state_.next_batch > nb)
      fail_input(c.data, "the checkpoint is at batch " + std::to_string(state_.next_batch) + " of epoch " +
                             std::to_string(state_.epoch) + ", which has only " + std::to_string(nb) + " batches",
                 "the data or the batching flags (--max-tokens, --tokens-per-sample, ...) changed since the "
                 "checkpoint; restore the originals, or pass --reset-dataloader");
    // The original Transformer-XL empties its memory at the start of every epoch (train() sets
    // mems = tuple()); fairseq's truncated_bptt_lm never does (REFERENCE.md §6.5).
    if (segment_ && state_.next_batch == 0 && c.bptt_order == data::BpttTargets::AcrossBlocks &&
        parse_lm_task(c.task) == LmTask::TruncatedBptt)
      segment_ = model_->new_segment_state(models::SegmentUse::Training);
    const int64_t size = groups_of(nb, c.update_freq);
    epoch_t0_ = now_seconds();
    if (world_.is_main()) {
      progress_.info("fairseq.trainer", "begin training epoch " + std::to_string(state_.epoch));
      progress_.info("fairseq_cli.train", "Start iterating over samples");
      progress_.begin_epoch(state_.epoch, size, groups_of(state_.next_batch, c.update_freq));
    }
    std::vector<LmBatch> group;
    while (state_.next_batch < nb && !stop && exit_code == 0) {
      const int64_t first = state_.next_batch, last = std::min(nb, first + c.update_freq);
      group.clear();
      for (int64_t i = first; i < last; ++i) group.push_back(train_split_->batch(i));
      state_.next_batch = last;
      const double t_step = now_seconds();
      const UpdateResult r =
          train_update(*model_, group, *optimizer_, *scheduler_, state_, update_params, world_, segment_.get());
      const double step_seconds = now_seconds() - t_step;
      if (!r.applied()) {
        ++nan_in_a_row_;
        log_warning("update " + std::to_string(state_.num_updates + 1) + ": loss or gradient is not finite (loss " +
                    std::to_string(r.loss_sum / std::max(r.ntokens, 1.0)) + "); skipping this update (" +
                    std::to_string(nan_in_a_row_) + " in a row, at most --max-consecutive-nan " +
                    std::to_string(c.max_consecutive_nan) + ")");
        if (nan_in_a_row_ >= c.max_consecutive_nan)
          throw Error(ErrorKind::Numeric,
                      "training stopped: " + std::to_string(nan_in_a_row_) +
                          " updates in a row had a non-finite loss or gradient (after update " +
                          std::to_string(state_.num_updates) + ")",
                      "lower --lr, set --clip-norm, or check the data; the checkpoints already written (" +
                          ckpt_path(c, "checkpoint_last.pt") + ") are untouched");
      } else {
        if (c.ema.store) {
          if (!ema_.built() && world_.is_main()) fairseq_log("root", "Copying EMA model to device cpu");
          ema_.step(optim_params(*model_), state_.num_updates, c.ema, state_.ema_update_counter);
        }
        after_update(r, step_seconds, groups_of(state_.next_batch, c.update_freq));
        if (state_.next_batch < nb) stop = validate_and_save(/*end_of_epoch=*/false);
        test_hooks::maybe_stall(state_.num_updates);
      }
      exit_code = stop_requested();
    }
    if (exit_code != 0) break;  // a stop signal: saved, no summary (fairseq dies of it)
    if (stop) {  // --max-update mid-epoch: fairseq's train() still prints the epoch's summary
      print_epoch_summary(epoch_stats());
      break;
    }
    // End of the epoch (fairseq: validate_and_save(end_of_epoch=True), then the epoch's summary,
    // whose sums validate_and_save clears for the next epoch).
    const Stats summary = epoch_stats();
    stop = validate_and_save(/*end_of_epoch=*/true);
    print_epoch_summary(summary);
  }
  progress_.end_epoch();
  if (world_.is_main()) {
    char took[64];
    std::snprintf(took, sizeof took, "%.1f", now_seconds() - t_start_);
    progress_.info("fairseq_cli.train", std::string("done training in ") + took + " seconds");
  }
  return exit_code;
}

}  // namespace

int run_training(TrainConfig c) {
  arm_graceful_stop();
  if (c.reset_lr_scheduler && c.optim.lr_scheduler != optim::SchedulerKind::ReduceLrOnPlateau)
    log_once(LogLevel::Warning, "--reset-lr-scheduler has no effect in stretch with this --lr-scheduler: the schedule "
                                "is a function of the update number (and epoch), recomputed after a resume; "
                                "--reset-optimizer restarts the update count (only reduce_lr_on_plateau keeps state)");  // core/signals.h: SIGINT/SIGTERM now save checkpoint_last.pt and stop
  check_run_flags(c);
  // --log-file: refused here if it cannot be written, before the save dir is made (train/progress.h).
  set_fairseq_log_file(dist::World::get().is_main() ? c.log_file : "");
  // The --save-dir is checked, locked and tidied before any data is read (train/save_dir.h).
  SaveDirLock save_dir_lock;
  if (!c.no_save && dist::World::get().is_main()) save_dir_lock = prepare_save_dir(c.save_dir);
  TrainingRun run(std::move(c));
  return run.run();
}

}  // namespace stretch::train
