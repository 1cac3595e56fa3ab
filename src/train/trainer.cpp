// train/trainer.cpp — the training loop of `stretch train` (contract in trainer.h): fairseq's
// fairseq_cli/train.py main/train/validate_and_save and checkpoint_utils.save_checkpoint, with
// each update delegated to train_update() (train/update.h).
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/log.h"
#include "core/signals.h"
#include "dist/world.h"
#include "ops/gemm.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/lm_data.h"
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
  double seconds = 0;
};

ValidResult validate(models::LanguageModel& model, LmSplit& split, const dist::World& world) {
  autograd::NoGradGuard no_grad;
  const double t0 = now_seconds();
  double sums[3] = {0, 0, 0};  // nats, tokens, sentences
  split.set_epoch(1);
  const int32_t pad = model.info().padding_idx;
  for (int64_t i = 0; i < split.num_batches(); ++i) {
    LmBatch b = split.batch(i);
    if (!b.src.defined()) continue;
    Var hidden = model.features(b.src, {.mode = models::Mode::Eval});
    const nn::HeadLoss loss = model.head().loss(hidden, b.tgt, pad, nn::LossUse::Validation);
    sums[0] += loss.loss.value().f32()[0];
    sums[1] += static_cast<double>(loss.ntokens);
    sums[2] += static_cast<double>(b.src.dim(0));
  }
  world.allreduce_sum(sums, 3);
  return {sums[1] > 0 ? sums[0] / sums[1] / kLn2 : 0.0, static_cast<int64_t>(sums[1]), static_cast<int64_t>(sums[2]),
          now_seconds() - t0};
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io(path, "cannot read the dictionary", "check the data directory");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string ckpt_path(const TrainConfig& c, const std::string& name) { return (fs::path(c.save_dir) / name).string(); }

// fairseq's retention: keep the newest N checkpoint_E_U.pt (--keep-interval-updates, by
// update) and checkpointE.pt (--keep-last-epochs, by epoch).
void prune(const TrainConfig& c) {
  auto prune_matching = [&](bool interval, int64_t keep) {
    if (keep < 0 || !fs::exists(c.save_dir)) return;
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(c.save_dir)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("checkpoint", 0) != 0 || e.path().extension() != ".pt") continue;
      const std::string mid = n.substr(10, n.size() - 13);
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
  const std::string tmp = to + ".tmp.link";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(from, tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  }
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
std::string restore_path(const TrainConfig& c) {
  if (c.restore_file == kDefaultRestoreFile) {
    const std::string p = ckpt_path(c, kDefaultRestoreFile);
    return fs::exists(p) ? p : std::string();
  }
  if (fs::exists(c.restore_file)) return c.restore_file;
  if (fs::exists(ckpt_path(c, c.restore_file))) return ckpt_path(c, c.restore_file);
  fail_input(c.restore_file, "--restore-file not found (also not in --save-dir " + c.save_dir + ")",
             "give the path of a checkpoint written by `stretch train`, or leave --restore-file out to start afresh");
}

// One training run: the state and the steps of fairseq_cli/train.py's main loop, each a method.
class TrainingRun {
 public:
  explicit TrainingRun(TrainConfig config);
  int run();

 private:
  void resume(const std::string& from);
  void save(const std::vector<std::string>& names);
  double run_validation();
  bool validate_and_save(bool end_of_epoch);
  void after_update(const UpdateResult& r, int64_t nb);
  int stop_requested();
  void end_of_epoch_log();
  double lr_now() const { return scheduler_->lr_at_epoch(state_.num_updates, state_.epoch); }

  TrainConfig c_;
  const dist::World& world_;
  LmData data_;
  std::unique_ptr<LmSplit> train_split_, valid_split_;
  std::unique_ptr<models::LanguageModel> model_;
  std::unique_ptr<models::SegmentState> segment_;
  std::string dictionary_text_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> scheduler_;
  TrainState state_;
  nlohmann::json config_json_;
  Progress progress_;
  double t_start_ = 0;
  int64_t nan_in_a_row_ = 0, save_count_ = 0;
  // Running sums for the log interval.
  double log_loss_ = 0, log_tokens_ = 0, log_gnorm_ = 0, log_clip_ = 0, log_bsz_ = 0, log_t0_ = 0;
  int64_t log_updates_ = 0;
};

void check_run_flags(const TrainConfig& c) {
  if (c.max_tokens <= 0 && c.batch_size <= 0)
    fail_usage("train: give --max-tokens or --batch-size", "e.g. --max-tokens 4096 (fairseq's usual choice)");
  if (c.max_tokens > 0 && c.max_tokens < c.tokens_per_sample)
    fail_usage("--max-tokens " + std::to_string(c.max_tokens) + " is smaller than --tokens-per-sample " +
                   std::to_string(c.tokens_per_sample),
               "raise --max-tokens or lower --tokens-per-sample");
  if (c.update_freq < 1) fail_usage("--update-freq must be >= 1, got " + std::to_string(c.update_freq));
  if (c.log_interval < 1) fail_usage("--log-interval must be >= 1, got " + std::to_string(c.log_interval));
  if (c.max_consecutive_nan < 1)
    fail_usage("--max-consecutive-nan must be >= 1, got " + std::to_string(c.max_consecutive_nan));
}

TrainingRun::TrainingRun(TrainConfig config)
    : c_(std::move(config)), world_(dist::World::get()), progress_(c_.log_format, !c_.no_progress_bar) {
  const TrainConfig& c = c_;
  data_ = open_lm_data(c.data);
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
                            .shard_count = world_.size()};
  train_split_ = open_lm_split(c.data, "train", data_, train_opts);
  if (!c.disable_validation) {
    LmSplitOptions vo = train_opts;
    vo.shuffle = false;
    if (c.max_tokens_valid > 0) vo.max_tokens = c.max_tokens_valid;
    if (c.batch_size_valid > 0) vo.batch_size = c.batch_size_valid;
    valid_split_ = open_lm_split(c.data, c.valid_subset, data_, vo);
  }
  check_training_memory(c.model);  // before allocating: a bad_alloc after minutes otherwise
  model_ = models::build_model(c.model);
  model_->init(c.seed);
  segment_ = model_->new_segment_state(models::SegmentUse::Training);
  dictionary_text_ = read_text_file(data_.dict_path);
  optimizer_ = make_optimizer(c.optim);
  scheduler_ = make_scheduler(c.optim, c.max_update);
  state_.seed = c.seed;
  config_json_ = c.to_json();
  if (const std::string from = restore_path(c); !from.empty()) resume(from);
  if (world_.is_main() && ops::matmul_precision() == ops::GemmPrecision::Bf16)
    log_info("bf16 matrix products (fp32 accumulation); weights, optimizer state and checkpoints in fp32");
  if (world_.is_main())
    log_info("model " + model_->info().summary + ": " + std::to_string(model_->params().numel()) +
             " parameters, vocabulary " + std::to_string(data_.vocab_size));
}

void TrainingRun::resume(const std::string& from) {
  const TrainConfig& c = c_;
  CheckpointContents ck;
  try {
    ck = read_checkpoint(from);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("cannot resume: ") + e.what(),
                "move " + from + " away to start afresh, or copy an earlier checkpoint (checkpoint_E_U.pt, "
                "checkpointN.pt) over it");
  }
  if (ck.dict_hash != data_.dict_hash)
    fail_input(from, "was trained with another dictionary (hash " + ck.dict_hash + "; " + data_.dict_path + " has " +
                         data_.dict_hash + ")",
               "use a fresh --save-dir, or the data-bin the checkpoint was trained on");
  check_same_architecture(from, ck.model, model_->config_json());
  models::load_weights(*model_, ck);
  if (segment_) segment_->load(segment_tensors(ck));
  state_ = ck.state;
  if (state_.seed != c.seed)
    log_warning("resuming a run started with --seed " + std::to_string(state_.seed) + " with --seed " +
                std::to_string(c.seed) + ": later batches and dropout masks differ from an uninterrupted run");
  state_.seed = c.seed;
  if (c.reset_dataloader) {
    state_.epoch = 1;
    state_.next_batch = 0;
    state_.epoch_loss_sum = state_.epoch_ntokens = 0;
  }
  if (c.reset_meters) state_.best_loss = NAN;
  if (!c.reset_optimizer) {
    optim::OptimizerState os;
    for (const auto& [name, t] : ck.file.tensors)
      if (name.rfind("optimizer.", 0) == 0) os.tensors.emplace_back(name.substr(10), t);
    os.scalars = ck.optimizer_scalars;
    os.source = from;
    optimizer_->load_state_dict(os, optim_params(*model_));
  }
  if (world_.is_main())
    log_info("resumed from " + from + " at update " + std::to_string(state_.num_updates) + ", epoch " +
             std::to_string(state_.epoch) + ", batch " + std::to_string(state_.next_batch));
}

void TrainingRun::save(const std::vector<std::string>& names) {
  const TrainConfig& c = c_;
  if (c.no_save || !world_.is_main() || names.empty()) return;
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
                     .optimizer = optimizer_.get(),
                     .segment = segment_.get()});
  } catch (...) {
    test_hooks::after_checkpoint_save();
    throw;
  }
  test_hooks::after_checkpoint_save();
  for (size_t i = 1; i < names.size(); ++i) publish_copy(first, ckpt_path(c, names[i]));
  prune(c);
}

// Validates (logging fairseq's valid_* fields); returns the loss, or NaN when there is no
// validation. state.best_loss follows fairseq's save_checkpoint.best (a minimum).
double TrainingRun::run_validation() {
  if (!valid_split_) return NAN;
  const ValidResult v = validate(*model_, *valid_split_, world_);
  if (std::isnan(state_.best_loss) || v.loss2 < state_.best_loss) state_.best_loss = v.loss2;
  if (world_.is_main())
    progress_.log("valid", {{"epoch", state_.epoch},
                            {"valid_loss", v.loss2},
                            {"valid_ppl", std::pow(2.0, v.loss2)},
                            {"valid_wps", static_cast<double>(v.ntokens) / std::max(v.seconds, 1e-9)},
                            {"valid_wpb", v.ntokens},
                            {"valid_bsz", v.nsentences},
                            {"valid_num_updates", state_.num_updates},
                            {"valid_best_loss", state_.best_loss}});
  return v.loss2;
}

// fairseq's validate_and_save: decides whether to validate and which files to write after
// an update; at the end of an epoch it also moves the state to the next epoch (before the
// save, so a resume from that checkpoint starts the next epoch). Returns "stop training".
bool TrainingRun::validate_and_save(bool end_of_epoch) {
  const TrainConfig& c = c_;
  const int64_t n = state_.num_updates, epoch = state_.epoch;
  const bool should_stop = c.max_update > 0 && n >= c.max_update;
  const bool interval_save = c.save_interval_updates > 0 && n > 0 && n % c.save_interval_updates == 0;
  const bool do_save = (end_of_epoch && epoch % c.save_interval == 0) || should_stop || interval_save;
  const bool do_validate = !c.disable_validation &&
                           ((!end_of_epoch && do_save) || (end_of_epoch && epoch % c.validate_interval == 0) ||
                            should_stop ||
                            (c.validate_interval_updates > 0 && n > 0 && n % c.validate_interval_updates == 0));
  const double prev_best = state_.best_loss;
  const double vloss = do_validate ? run_validation() : NAN;
  std::vector<std::string> names;
  if (end_of_epoch && !c.no_epoch_checkpoints && epoch % c.save_interval == 0)
    names.push_back("checkpoint" + std::to_string(epoch) + ".pt");
  if (!end_of_epoch && interval_save)
    names.push_back("checkpoint_" + std::to_string(epoch) + "_" + std::to_string(n) + ".pt");
  if (!std::isnan(vloss) && (std::isnan(prev_best) || vloss <= prev_best)) names.push_back("checkpoint_best.pt");
  names.push_back("checkpoint_last.pt");
  if (end_of_epoch) {
    state_.epoch += 1;
    state_.next_batch = 0;
    state_.epoch_loss_sum = state_.epoch_ntokens = 0;
  }
  if (do_save) save(names);
  return should_stop;
}

// Bookkeeping of an applied update: epoch sums, the progress bar, the train_inner log line.
void TrainingRun::after_update(const UpdateResult& r, int64_t nb) {
  const TrainConfig& c = c_;
  nan_in_a_row_ = 0;
  state_.epoch_loss_sum += r.loss_sum;
  state_.epoch_ntokens += r.ntokens;
  log_loss_ += r.loss_sum;
  log_tokens_ += r.ntokens;
  log_bsz_ += r.nsentences;
  log_gnorm_ += r.gnorm;
  log_clip_ += (c.optim.clip_norm > 0 && r.gnorm > c.optim.clip_norm) ? 1.0 : 0.0;
  ++log_updates_;
  progress_.bar(state_.epoch, state_.next_batch, nb, r.loss_sum / std::max(r.ntokens, 1.0) / kLn2);
  if (state_.num_updates % c.log_interval != 0 || !world_.is_main()) return;
  const double dt = std::max(now_seconds() - log_t0_, 1e-9);
  const double l2 = log_loss_ / std::max(log_tokens_, 1.0) / kLn2;
  const double updates = static_cast<double>(log_updates_);
  nlohmann::ordered_json f = {
      {"epoch", state_.epoch},
      {"update", static_cast<double>(state_.epoch - 1) + static_cast<double>(state_.next_batch) / static_cast<double>(nb)},
      {"loss", l2},
      {"ppl", std::pow(2.0, l2)},
      {"wps", log_tokens_ / dt},
      {"ups", updates / dt},
      {"wpb", log_tokens_ / updates},
      {"bsz", log_bsz_ / updates},
      {"num_updates", state_.num_updates},
      {"lr", lr_now()},
      {"gnorm", log_gnorm_ / updates}};
  if (c.optim.clip_norm > 0) f["clip"] = 100.0 * log_clip_ / updates;
  f["train_wall"] = now_seconds() - t_start_;
  f["wall"] = now_seconds() - t_start_;
  progress_.log("train_inner", f);
  log_loss_ = log_tokens_ = log_gnorm_ = log_clip_ = log_bsz_ = 0;
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
  log_warning("received signal " + std::to_string(sig) + ": saving checkpoint_last.pt and stopping");
  save({"checkpoint_last.pt"});
  return 128 + sig;
}

void TrainingRun::end_of_epoch_log() {
  if (state_.epoch_ntokens <= 0 || !world_.is_main()) return;
  const double l2 = state_.epoch_loss_sum / state_.epoch_ntokens / kLn2;
  progress_.log("train", {{"epoch", state_.epoch},
                          {"train_loss", l2},
                          {"train_ppl", std::pow(2.0, l2)},
                          {"train_num_updates", state_.num_updates},
                          {"train_lr", lr_now()},
                          {"train_wall", now_seconds() - t_start_}});
}

int TrainingRun::run() {
  const TrainConfig& c = c_;
  const UpdateParams update_params{.clip_norm = c.optim.clip_norm, .seed = c.seed, .pad = data_.pad};
  t_start_ = log_t0_ = now_seconds();
  bool stop = c.max_update > 0 && state_.num_updates >= c.max_update;
  int exit_code = 0;
  while (!stop && exit_code == 0) {
    if (c.max_epoch > 0 && state_.epoch > c.max_epoch) break;
    if (c.optim.stop_min_lr >= 0 && lr_now() <= c.optim.stop_min_lr) {
      log_info("stopping: learning rate " + std::to_string(lr_now()) + " <= --stop-min-lr " +
               std::to_string(c.optim.stop_min_lr));
      break;
    }
    train_split_->set_epoch(state_.epoch);
    const int64_t nb = train_split_->num_batches();
    if (state_.next_batch > nb)
      fail_input(c.data, "the checkpoint is at batch " + std::to_string(state_.next_batch) + " of epoch " +
                             std::to_string(state_.epoch) + ", which has only " + std::to_string(nb) + " batches",
                 "the data or the batching flags (--max-tokens, --tokens-per-sample, ...) changed since the "
                 "checkpoint; restore the originals, or pass --reset-dataloader");
    std::vector<LmBatch> group;
    while (state_.next_batch < nb && !stop && exit_code == 0) {
      const int64_t first = state_.next_batch, last = std::min(nb, first + c.update_freq);
      group.clear();
      for (int64_t i = first; i < last; ++i) group.push_back(train_split_->batch(i));
      state_.next_batch = last;
      const UpdateResult r =
          train_update(*model_, group, *optimizer_, *scheduler_, state_, update_params, world_, segment_.get());
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
        after_update(r, nb);
        if (state_.next_batch < nb) stop = validate_and_save(/*end_of_epoch=*/false);
        test_hooks::maybe_stall(state_.num_updates);
      }
      exit_code = stop_requested();
    }
    if (stop || exit_code != 0) break;
    // End of the epoch (fairseq: validate_and_save(end_of_epoch=True), then the epoch line).
    progress_.end_bar();
    end_of_epoch_log();
    stop = validate_and_save(/*end_of_epoch=*/true);
  }
  progress_.end_bar();
  if (world_.is_main())
    log_info("done training at update " + std::to_string(state_.num_updates) + " in " +
             std::to_string(now_seconds() - t_start_) + " seconds");
  return exit_code;
}

}  // namespace

int run_training(TrainConfig c) {
  arm_graceful_stop();  // core/signals.h: SIGINT/SIGTERM now save checkpoint_last.pt and stop
  check_run_flags(c);
  // The --save-dir is checked, locked and tidied before any data is read (train/save_dir.h).
  SaveDirLock save_dir_lock;
  if (!c.no_save && dist::World::get().is_main()) save_dir_lock = prepare_save_dir(c.save_dir);
  TrainingRun run(std::move(c));
  return run.run();
}

}  // namespace stretch::train
