#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/log.h"
#include "dist/world.h"
#include "ops/gemm.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/lm_data.h"
#include "train/optim_settings.h"
#include "train/progress.h"
#include "train/signals.h"

namespace stretch::train {
namespace fs = std::filesystem;
using autograd::Var;

namespace {

constexpr double kLn2 = 0.69314718055994530942;

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::vector<optim::OptimParam> optim_params(models::TransformerLM& model) {
  std::vector<optim::OptimParam> out;
  for (const auto& [name, var] : model.params().items())
    out.push_back({name, var.data(), var.grad_data(), var.numel()});
  return out;
}

// Mean NLL (base 2) over a split's non-pad targets, no dropout, no gradient.
struct ValidResult {
  double loss2 = 0;
  int64_t ntokens = 0;
  double seconds = 0;
};

ValidResult validate(models::TransformerLM& model, LmSplit& split, const dist::World& world) {
  autograd::NoGradGuard no_grad;
  double t0 = now_seconds();
  double sums[2] = {0, 0};  // nats, tokens
  split.set_epoch(1);
  for (int64_t i = 0; i < split.num_batches(); ++i) {
    LmBatch b = split.batch(i);
    if (!b.src.defined()) continue;
    Var logits = model.forward(b.src, {.mode = models::Mode::Eval});
    int64_t count = 0;
    Var loss = autograd::cross_entropy(logits, b.tgt, model.config().padding_idx, ops::Reduction::Sum, &count);
    sums[0] += loss.value().f32()[0];
    sums[1] += static_cast<double>(count);
  }
  world.allreduce_sum(sums, 2);
  return {sums[1] > 0 ? sums[0] / sums[1] / kLn2 : 0.0, static_cast<int64_t>(sums[1]), now_seconds() - t0};
}

std::string ckpt_path(const TrainConfig& c, const std::string& name) { return (fs::path(c.save_dir) / name).string(); }

// fairseq's retention: keep the newest N checkpoint_E_U.pt / checkpointE.pt files.
void prune(const TrainConfig& c) {
  auto prune_matching = [&](bool interval, int64_t keep) {
    if (keep < 0 || !fs::exists(c.save_dir)) return;
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(c.save_dir)) {
      std::string n = e.path().filename().string();
      if (n.rfind("checkpoint", 0) != 0 || e.path().extension() != ".pt") continue;
      std::string mid = n.substr(10, n.size() - 13);
      if (mid.empty() || mid == "_last" || mid == "_best") continue;
      bool is_interval = mid[0] == '_';
      if (is_interval != interval) continue;
      try {
        int64_t key = std::stoll(is_interval ? mid.substr(mid.rfind('_') + 1) : mid);
        found.emplace_back(key, e.path());
      } catch (...) {
      }
    }
    std::sort(found.rbegin(), found.rend());
    for (size_t i = static_cast<size_t>(keep); i < found.size(); ++i) fs::remove(found[i].second);
  };
  prune_matching(true, c.keep_interval_updates);
  prune_matching(false, c.keep_last_epochs);
}

}  // namespace

int run_training(TrainConfig c) {
  const dist::World& world = dist::World::get();
  install_stop_handlers();
  LmData data = open_lm_data(c.data);
  c.model.vocab_size = data.vocab_size;
  c.model.padding_idx = data.pad;
  if (c.max_tokens <= 0 && c.batch_size <= 0)
    fail_usage("train: give --max-tokens or --batch-size", "e.g. --max-tokens 4096 (fairseq's usual choice)");
  if (c.max_tokens > 0 && c.max_tokens < c.tokens_per_sample)
    fail_usage("--max-tokens " + std::to_string(c.max_tokens) + " is smaller than --tokens-per-sample " +
               std::to_string(c.tokens_per_sample), "raise --max-tokens or lower --tokens-per-sample");

  LmSplitOptions train_opts{.tokens_per_sample = c.tokens_per_sample,
                            .sample_break_mode = c.sample_break_mode,
                            .max_tokens = c.max_tokens,
                            .batch_size = c.batch_size,
                            .required_batch_size_multiple = c.required_batch_size_multiple,
                            .seed = c.seed,
                            .shuffle = true,
                            .shard_rank = world.rank(),
                            .shard_count = world.size()};
  auto train_split = open_lm_split(c.data, "train", data, train_opts);
  std::unique_ptr<LmSplit> valid_split;
  if (!c.disable_validation) {
    LmSplitOptions vo = train_opts;
    vo.shuffle = false;
    if (c.max_tokens_valid > 0) vo.max_tokens = c.max_tokens_valid;
    if (c.batch_size_valid > 0) vo.batch_size = c.batch_size_valid;
    valid_split = open_lm_split(c.data, c.valid_subset, data, vo);
  }

  models::TransformerLM model(c.model);
  model.init(c.seed);
  auto optimizer = make_optimizer(c.optim);
  auto scheduler = make_scheduler(c.optim, c.max_update);

  TrainState state;
  const nlohmann::json config_json = c.to_json();
  const std::string last_path = ckpt_path(c, c.restore_file);
  if (!c.no_save && fs::exists(last_path)) {
    CheckpointContents ck = read_checkpoint(last_path);
    if (ck.dict_hash != data.dict_hash)
      fail_input(last_path, "was trained with another dictionary (hash " + ck.dict_hash + ", data has " + data.dict_hash + ")",
                 "use a fresh --save-dir, or the data-bin the checkpoint was trained on");
    load_model_weights(model, ck);
    state = ck.state;
    if (!c.reset_optimizer) {
      optim::OptimizerState os;
      for (const auto& [name, t] : ck.file.tensors)
        if (name.rfind("optimizer.", 0) == 0) os.tensors.emplace_back(name.substr(10), t);
      os.scalars = ck.optimizer_scalars;
      os.source = last_path;
      optimizer->load_state_dict(os, optim_params(model));
    }
    log_info("resumed from " + last_path + " at update " + std::to_string(state.num_updates) + ", epoch " +
             std::to_string(state.epoch));
  }
  if (world.is_main() && ops::matmul_precision() == ops::GemmPrecision::Bf16)
    log_info("bf16 matrix products (fp32 accumulation); weights, optimizer state and checkpoints in fp32");
  if (world.is_main()) {
    log_info("model " + c.model.arch + " pos=" + models::pos_method_name(c.model.pos) + ": " +
             std::to_string(model.params().numel()) + " parameters, vocabulary " + std::to_string(data.vocab_size));
  }

  Progress progress(c.log_format, !c.no_progress_bar);
  auto params = optim_params(model);
  const double t_start = now_seconds();
  auto lr_now = [&] { return scheduler->lr_at_epoch(state.num_updates, state.epoch); };
  double lr = lr_now();
  int64_t nan_in_a_row = 0;
  int exit_code = 0;

  auto save = [&](const std::vector<std::string>& names) {
    if (c.no_save || !world.is_main()) return;
    fs::create_directories(c.save_dir);
    // Write once, then copy the finished file to the other names (each copy atomic too).
    const std::string first = ckpt_path(c, names.front());
    save_checkpoint(first, model, config_json, data.dict_hash, state, optimizer.get());
    for (size_t i = 1; i < names.size(); ++i) {
      std::string tmp = ckpt_path(c, names[i]) + ".tmp";
      fs::copy_file(first, tmp, fs::copy_options::overwrite_existing);
      fs::rename(tmp, ckpt_path(c, names[i]));
    }
    prune(c);
  };
  auto run_validation = [&]() -> double {
    if (!valid_split) return NAN;
    ValidResult v = validate(model, *valid_split, world);
    bool best = std::isnan(state.best_loss) || v.loss2 < state.best_loss;
    if (best) state.best_loss = v.loss2;
    progress.log("valid", {{"epoch", state.epoch},
                           {"valid_loss", v.loss2},
                           {"valid_ppl", std::pow(2.0, v.loss2)},
                           {"valid_wps", v.ntokens / std::max(v.seconds, 1e-9)},
                           {"valid_wpb", v.ntokens},
                           {"valid_num_updates", state.num_updates},
                           {"valid_best_loss", state.best_loss}});
    return v.loss2;
  };
  auto done = [&] {
    if (c.max_update > 0 && state.num_updates >= c.max_update) return true;
    if (c.max_epoch > 0 && state.epoch > c.max_epoch) return true;
    return false;
  };

  // Running averages for the log interval.
  double log_loss = 0, log_tokens = 0, log_gnorm = 0, log_clip = 0, log_t0 = now_seconds();
  int64_t log_updates = 0, log_bsz = 0;

  while (!done() && exit_code == 0) {
    if (c.optim.stop_min_lr >= 0 && lr <= c.optim.stop_min_lr) {
      log_info("stopping: learning rate " + std::to_string(lr) + " <= --stop-min-lr");
      break;
    }
    train_split->set_epoch(state.epoch);
    const int64_t nb = train_split->num_batches();
    double epoch_loss = 0, epoch_tokens = 0;
    while (state.next_batch < nb && !done()) {
      model.params().zero_grad();
      double group[3] = {0, 0, 0};  // loss (nats), ntokens, sentences
      const int64_t first = state.next_batch;
      const int64_t last = std::min(nb, first + c.update_freq);
      for (int64_t i = first; i < last; ++i) {
        LmBatch b = train_split->batch(i);
        if (!b.src.defined()) continue;  // an empty fill batch of this rank
        Var logits = model.forward(b.src, {.mode = models::Mode::Train,
                                           .seed = c.seed,
                                           .step = static_cast<uint64_t>(state.num_updates),
                                           .micro = static_cast<uint64_t>(i - first)});
        Var loss = autograd::cross_entropy(logits, b.tgt, data.pad, ops::Reduction::Sum, nullptr,
                                           autograd::LogitsBuffer::ReuseForGradient);
        autograd::tape().backward(loss);
        group[0] += loss.value().f32()[0];
        group[1] += static_cast<double>(b.ntokens);
        group[2] += static_cast<double>(b.src.dim(0));
      }
      state.next_batch = last;
      for (auto& p : params) world.allreduce_sum(p.grad, p.numel);
      world.allreduce_sum(group, 3);
      // grads / ntokens and clipping in one pass (the norm's pass finds non-finite grads too).
      const double gnorm = std::isfinite(group[0])
                               ? optim::scale_and_clip_grads(params, 1.0 / std::max(group[1], 1.0), c.optim.clip_norm)
                               : NAN;
      const bool finite = std::isfinite(gnorm);
      if (!finite) {
        ++nan_in_a_row;
        log_warning("update " + std::to_string(state.num_updates + 1) + ": non-finite loss or gradient; skipping this update (" +
                    std::to_string(nan_in_a_row) + " in a row)");
        if (nan_in_a_row >= c.max_consecutive_nan) {
          save({"checkpoint_last.pt"});
          throw Error(ErrorKind::Numeric,
                      "training stopped: " + std::to_string(nan_in_a_row) + " non-finite updates in a row at update " +
                          std::to_string(state.num_updates),
                      "lower --lr, set --clip-norm, or check the data; checkpoint_last.pt holds the last finite state");
        }
        continue;
      }
      nan_in_a_row = 0;
      optimizer->step(params, lr);
      state.num_updates += 1;
      lr = lr_now();

      const double loss2 = group[0] / std::max(group[1], 1.0) / kLn2;
      epoch_loss += group[0];
      epoch_tokens += group[1];
      log_loss += group[0];
      log_tokens += group[1];
      log_bsz += static_cast<int64_t>(group[2]);
      log_gnorm += gnorm;
      log_clip += (c.optim.clip_norm > 0 && gnorm > c.optim.clip_norm) ? 1.0 : 0.0;
      ++log_updates;
      progress.bar(state.epoch, state.next_batch, nb, loss2);
      if (state.num_updates % c.log_interval == 0 && world.is_main()) {
        const double dt = std::max(now_seconds() - log_t0, 1e-9);
        const double l2 = log_loss / std::max(log_tokens, 1.0) / kLn2;
        progress.log("train_inner", {{"epoch", state.epoch},
                                     {"update", state.epoch - 1 + static_cast<double>(state.next_batch) / nb},
                                     {"loss", l2},
                                     {"ppl", std::pow(2.0, l2)},
                                     {"wps", log_tokens / dt},
                                     {"ups", log_updates / dt},
                                     {"wpb", log_tokens / log_updates},
                                     {"bsz", static_cast<double>(log_bsz) / log_updates},
                                     {"num_updates", state.num_updates},
                                     {"lr", lr},
                                     {"gnorm", log_gnorm / log_updates},
                                     {"clip", 100.0 * log_clip / log_updates},
                                     {"train_wall", now_seconds() - t_start},
                                     {"wall", now_seconds() - t_start}});
        log_loss = log_tokens = log_gnorm = log_clip = 0;
        log_updates = log_bsz = 0;
        log_t0 = now_seconds();
      }
      const bool end_of_epoch = state.next_batch >= nb;
      if (!end_of_epoch && c.validate_interval_updates > 0 && state.num_updates % c.validate_interval_updates == 0)
        run_validation();
      if (!end_of_epoch && c.save_interval_updates > 0 && state.num_updates % c.save_interval_updates == 0) {
        std::vector<std::string> names = {"checkpoint_" + std::to_string(state.epoch) + "_" +
                                              std::to_string(state.num_updates) + ".pt",
                                          "checkpoint_last.pt"};
        save(names);
      }
      if (int sig = stop_signal()) {
        log_warning("received signal " + std::to_string(sig) + ": saving checkpoint_last.pt and stopping");
        save({"checkpoint_last.pt"});
        exit_code = 128 + sig;
        break;
      }
    }
    if (exit_code != 0) break;
    if (state.next_batch >= nb) {
      progress.end_bar();
      const double l2 = epoch_loss / std::max(epoch_tokens, 1.0) / kLn2;
      if (epoch_tokens > 0 && world.is_main())
        progress.log("train", {{"epoch", state.epoch},
                               {"train_loss", l2},
                               {"train_ppl", std::pow(2.0, l2)},
                               {"train_num_updates", state.num_updates},
                               {"train_lr", lr},
                               {"train_wall", now_seconds() - t_start}});
      const double prev_best = state.best_loss;
      double vloss = NAN;
      if (state.epoch % c.validate_interval == 0 || done()) vloss = run_validation();
      const bool is_best = !std::isnan(vloss) && (std::isnan(prev_best) || vloss < prev_best);
      const int64_t finished_epoch = state.epoch;
      state.epoch += 1;
      state.next_batch = 0;
      lr = lr_now();
      std::vector<std::string> names;
      if (!c.no_epoch_checkpoints && finished_epoch % c.save_interval == 0)
        names.push_back("checkpoint" + std::to_string(finished_epoch) + ".pt");
      if (is_best) names.push_back("checkpoint_best.pt");
      names.push_back("checkpoint_last.pt");
      save(names);
    } else if (done()) {
      // Stopped mid-epoch by --max-update: validate and save like fairseq's end of training.
      progress.end_bar();
      const double prev_best = state.best_loss;
      double vloss = run_validation();
      std::vector<std::string> names = {"checkpoint_" + std::to_string(state.epoch) + "_" +
                                        std::to_string(state.num_updates) + ".pt"};
      if (!std::isnan(vloss) && (std::isnan(prev_best) || vloss < prev_best)) names.push_back("checkpoint_best.pt");
      names.push_back("checkpoint_last.pt");
      save(names);
    }
  }
  progress.end_bar();
  if (world.is_main()) log_info("done training in " + std::to_string(now_seconds() - t_start) + " seconds");
  return exit_code;
}

}  // namespace stretch::train
