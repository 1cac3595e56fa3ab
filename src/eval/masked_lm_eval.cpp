// eval/masked_lm_eval.cpp — see masked_lm_eval.h.
#include "eval/masked_lm_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/output_file.h"
#include "train/masked_lm_data.h"

namespace stretch::eval {

int run_masked_lm_eval(const EvalLmConfig& cfg) {
  const EvalOptions& o = cfg.options;
  if (o.context_window > 0 || o.stride > 0)
    fail_usage("--context-window/--stride with --task masked_lm: an encoder sees its whole block in both directions",
               "drop them; --tokens-per-sample sets the block length");
  if (cfg.output_word_probs || cfg.output_word_stats || !cfg.post_process.empty() || !o.word_probs_path.empty())
    fail_usage("word output (--output-word-probs, --output-word-stats, --post-process, --dump-nll) is for decoders",
               "--task masked_lm prints the masked-token loss only");
  if (o.num_shards > 1) fail_usage("--num-shards with --task masked_lm is not supported", "evaluate the whole split");
  models::ModelFile ck;
  auto model = load_eval_model(cfg.path, cfg.overrides, &ck);
  const models::ModelInfo info = model->info();
  if (info.family != "roberta")
    fail_usage("--task masked_lm: " + cfg.path + " is a " + info.family + " model",
               "masked-token perplexity is for encoders (--arch roberta_*); evaluate decoders without --task");
  // Position interpolation (arXiv:2310.13017) for the symmetric bias: slopes · L_train / L_eval.
  double slope_scale = 1.0;
  if (cfg.alibi_interpolate) {
    const int64_t eval_length = o.tokens_per_sample > 0 ? o.tokens_per_sample : info.tokens_per_sample;
    const nlohmann::json ov = alibi_interpolation_overrides(cfg.path, model->config_json(), cfg.overrides, eval_length);
    slope_scale = ov.at("alibi_slope_scale").get<double>();
    model = load_eval_model(cfg.path, ov, &ck);
    std::printf("stretch | eval-lm | ALiBi position interpolation: slopes x %lld / %lld = %.6g\n",
                static_cast<long long>(info.tokens_per_sample), static_cast<long long>(eval_length), slope_scale);
  }
  const train::LmData data = train::open_masked_lm_data(cfg.data);
  if (data.vocab_size != info.vocab_size || !models::dictionary_matches(ck, data.dict_hash))
    fail_input(data.dict_path, "is not the dictionary the checkpoint " + cfg.path + " was trained with (" +
                                   std::to_string(data.vocab_size) + " symbols with <mask>; checkpoint: " +
                                   std::to_string(info.vocab_size) + ")",
               "evaluate on a data-bin binarized with the training dictionary (preprocess --srcdict)");
  const int64_t L = o.tokens_per_sample > 0 ? o.tokens_per_sample : info.tokens_per_sample;
  train::LmSplitOptions so{.tokens_per_sample = L,
                           .sample_break_mode = data::BreakMode::None,
                           .max_tokens = o.max_sentences > 0 ? o.max_tokens : (o.max_tokens > 0 ? o.max_tokens : std::max<int64_t>(4096, L)),
                           .batch_size = o.max_sentences,
                           .required_batch_size_multiple = 1,
                           .seed = 1,
                           .shuffle = false,
                           .task = train::LmTask::MaskedLm};
  auto split = train::open_lm_split(cfg.data, cfg.gen_subset, data, so);
  std::printf("stretch | eval-lm | %s | masked_lm: blocks of %lld tokens (<s> + %lld), %g%% chosen "
              "(80/10/10), the masks of seed 1, epoch 1\n",
              cfg.gen_subset.c_str(), static_cast<long long>(L), static_cast<long long>(L - 1), 100 * so.mask.mask_prob);
  std::fflush(stdout);
  autograd::NoGradGuard no_grad;
  double nll = 0;
  int64_t count = 0, passes = 0;
  const double t0 = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  for (int64_t i = 0; i < split->num_batches(); ++i) {
    const train::LmBatch b = split->batch(i);
    if (!b.src.defined()) continue;
    const autograd::Var hidden = model->features(b.src, {.mode = models::Mode::Eval});
    const nn::HeadLoss l = model->head().loss(hidden, b.tgt, info.padding_idx, nn::LossUse::Validation);
    const double v = l.loss.value().f32()[0];
    if (!std::isfinite(v))
      throw Error(ErrorKind::Numeric, cfg.path + ": a non-finite masked_lm loss in batch " + std::to_string(i),
                  "the checkpoint's weights may be corrupt");
    nll += v;
    count += l.ntokens;
    ++passes;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() - t0;
  if (count == 0) fail_input(cfg.data, "split '" + cfg.gen_subset + "' gave no masked token", "evaluate a longer split");
  const double loss2 = nll / static_cast<double>(count) / std::log(2.0), ppl = std::pow(2.0, loss2);
  std::printf("Evaluated %lld masked tokens in %.1fs (%.2f tokens/s)\n", static_cast<long long>(count), seconds,
              static_cast<double>(count) / std::max(seconds, 1e-9));
  std::printf("Loss (base 2): %.4f, Perplexity: %.2f\n", loss2, ppl);
  std::fflush(stdout);
  if (!cfg.results_json.empty()) {
    const nlohmann::json config = model->config_json();
    nlohmann::json j = {{"protocol", "masked_lm"},
                        {"split", cfg.gen_subset},
                        {"checkpoint", cfg.path},
                        {"count", count},
                        {"loss_base2", loss2},
                        {"ppl", ppl},
                        {"nll_sum_nats", nll},
                        {"tokens_per_sample", L},
                        {"train_tokens_per_sample", info.tokens_per_sample},
                        {"pos", config.value("pos", std::string("?"))},
                        {"forward_passes", passes},
                        {"seconds", seconds}};
    if (cfg.alibi_interpolate) j["alibi_slope_scale"] = slope_scale;
    write_file_atomically(cfg.results_json, "the results (--results-json)", j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace stretch::eval
