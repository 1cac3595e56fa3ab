// tools/parity_dump.cpp — writes what the PyTorch oracle (tests/parity) checks stretch against.
// Two modes, both starting from a freshly initialised model whose checkpoint goes to --checkpoint:
//  * model dump (default): one batch's src_tokens, target, logits [B, T, V], summed NLL loss [1]
//    and every parameter's gradient ("grad.<name>") to --dump (check_transformer_lm.py), through
//    the same calls as a training step (cross_entropy with LogitsBuffer::ReuseForGradient);
//  * --trajectory OPT.json: --steps updates through train::train_update() — the very function
//    `stretch train` runs — on random batches; writes the batches (src_tokens, target
//    [S, B, T]) to --batches and one {"loss" (bits), "lr", "gnorm"} per update to --losses
//    (check_trajectory.py). OPT.json holds fairseq names: optimizer, lr, momentum,
//    weight_decay, adam_betas, adam_eps, lr_scheduler, warmup_updates, warmup_init_lr, min_lr,
//    max_lr, lr_period_updates, t_mult, lr_shrink, max_update, clip_norm.
//  * --masked-lm K: the model dump with a fixed masked_lm batch (encoders; run_roberta_parity.py).
//  * --segments K: the model dump over K consecutive batches through the family's training
//    memory (--mem-len; run_memory_parity.py).
// The last row of every batch ends in --pad pad tokens (right padding, as fairseq collates).
// --bias-noise S perturbs every *bias parameter after init (zero-initialised biases hide bias bugs).
// --normformer-noise S perturbs NormFormer's c_attn, w_resid, attn_ln.*, ffn_layernorm.* (at init 1 or a
// LayerNorm's 1 / 0, they would hide a scale applied to the wrong channels).
// Usage: stretch_parity_dump --model-json '{"pos":"alibi","vocab_size":50}' --batch 2 --len 16
//          --pad 3 --seed 1 --checkpoint ckpt.pt --dump dump.safetensors
//        stretch_parity_dump --model-json ... --checkpoint init.pt --trajectory opt.json
//          --steps 20 --batches batches.safetensors --losses losses.json
#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <iostream>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "dist/world.h"
#include "models/registry.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"
#include "train/optim_settings.h"
#include "train/update.h"

using namespace stretch;

namespace {

// Random ids in [4, V) ([B, T] I32 each); the last row ends in `pad` pad tokens in both.
void random_batch(Rng& rng, const models::ModelInfo& cfg, int64_t pad, Tensor& src, Tensor& tgt) {
  const int64_t B = src.dim(0), T = src.dim(1);
  for (int64_t i = 0; i < B * T; ++i) {
    src.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(cfg.vocab_size - 4)));
    tgt.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(cfg.vocab_size - 4)));
  }
  for (int64_t t = T - pad; t < T; ++t) {
    src.i32()[(B - 1) * T + t] = cfg.padding_idx;
    tgt.i32()[(B - 1) * T + t] = cfg.padding_idx;
  }
}

train::OptimSettings optim_settings(const nlohmann::json& j, int64_t* max_update) {
  train::OptimSettings s;
  if (j.contains("optimizer")) s.optimizer = optim::parse_optimizer_kind(j.at("optimizer").get<std::string>());
  if (j.contains("lr")) s.lr = {j.at("lr").get<double>()};
  s.momentum = j.value("momentum", s.momentum);
  s.weight_decay = j.value("weight_decay", s.weight_decay);
  s.adam_betas = j.value("adam_betas", s.adam_betas);
  s.adam_eps = j.value("adam_eps", s.adam_eps);
  if (j.contains("lr_scheduler"))
    s.lr_scheduler = optim::parse_scheduler_kind(j.at("lr_scheduler").get<std::string>());
  s.warmup_updates = j.value("warmup_updates", s.warmup_updates);
  s.warmup_init_lr = j.value("warmup_init_lr", s.warmup_init_lr);
  s.min_lr = j.value("min_lr", s.min_lr);
  s.max_lr = j.value("max_lr", s.max_lr);
  s.lr_period_updates = j.value("lr_period_updates", s.lr_period_updates);
  s.t_mult = j.value("t_mult", s.t_mult);
  s.lr_shrink = j.value("lr_shrink", s.lr_shrink);
  s.clip_norm = j.value("clip_norm", s.clip_norm);
  *max_update = j.value("max_update", int64_t{0});
  return s;
}

int model_dump(models::LanguageModel& model, int64_t batch, int64_t len, int64_t pad, uint64_t seed, uint64_t step,
               int64_t masked_lm, const std::string& dump) {
  const models::ModelInfo cfg = model.info();
  Rng rng(seed, 99);
  Tensor src = Tensor::empty({batch, len}, DType::I32), tgt = Tensor::empty({batch, len}, DType::I32);
  random_batch(rng, cfg, pad, src, tgt);
  if (masked_lm > 0)  // a fixed mask: every K-th non-pad position is <mask> (the last id) and scored
    for (int64_t i = 0; i < batch * len; ++i) {
      if (src.i32()[i] == cfg.padding_idx) continue;
      if (i % masked_lm == 0) src.i32()[i] = static_cast<int32_t>(cfg.vocab_size - 1);
      else tgt.i32()[i] = cfg.padding_idx;
    }
  autograd::Var hidden = model.features(src, {.mode = models::Mode::Train, .seed = seed, .step = step});  // [B, T, C]
  Tensor logits_copy;  // [B, T, V]: the head's scores of the same hidden states (no gradient)
  {
    autograd::NoGradGuard no_grad;
    logits_copy = model.head().log_scores(hidden.value());
  }
  // The training loss, exactly as train_update() computes it.
  autograd::Var loss = model.head().loss(hidden, tgt, cfg.padding_idx, nn::LossUse::Training).loss;
  autograd::tape().backward(loss);
  NamedTensors out = {{"src_tokens", src}, {"target", tgt}, {"logits", logits_copy}, {"loss", loss.value()}};
  for (const auto& [name, var] : model.params().items()) out.emplace_back("grad." + name, var.grad());
  save_safetensors(dump, out, {{"config", model.config_json().dump()}, {"step", std::to_string(step)}});
  std::cout << "loss " << loss.value().f32()[0] << "\n";
  return 0;
}

// --segments K (a family with training memory, e.g. --mem-len): K consecutive batches through
// one SegmentState in training mode (dropout 0 in the parity configs), each segment's loss
// backward in turn, so the gradients are the sum over the K segments with the memory detached.
// Writes src_tokens / target [K, B, T], logits [K, B, T, V], loss [K] (the head's), aux_loss [K] (the
// family's aux_loss(), 0 without; added to the loss before backward, as train_update does),
// sample_size [K] (the head's), metric.<key> [K] (train_metrics()) and the summed "grad.<name>".
int segments_dump(models::LanguageModel& model, int64_t segments, int64_t batch, int64_t len, int64_t pad,
                  uint64_t seed, const std::string& dump) {
  const models::ModelInfo cfg = model.info();
  std::unique_ptr<models::SegmentState> state = model.new_segment_state(models::SegmentUse::Training);
  if (!state) fail_usage("--segments needs a model with training memory (e.g. \"mem_len\": 8 in --model-json)");
  Rng rng(seed, 99);
  const int64_t V = cfg.vocab_size;
  Tensor all_src = Tensor::empty({segments, batch, len}, DType::I32), all_tgt = Tensor::empty({segments, batch, len}, DType::I32);
  Tensor all_logits = Tensor::empty({segments, batch, len, V}), losses = Tensor::empty({segments});
  Tensor aux_losses = Tensor::zeros({segments}), sample_sizes = Tensor::zeros({segments});
  std::map<std::string, Tensor> metrics;  // the family's train_metrics() per segment
  model.params().zero_grad();
  for (int64_t k = 0; k < segments; ++k) {
    Tensor src = Tensor::empty({batch, len}, DType::I32), tgt = Tensor::empty({batch, len}, DType::I32);
    random_batch(rng, cfg, pad, src, tgt);
    autograd::Var hidden =
        model.features(src, {.mode = models::Mode::Train, .seed = seed, .step = static_cast<uint64_t>(k), .state = state.get()});
    {
      autograd::NoGradGuard no_grad;
      Tensor logits = model.head().log_scores(hidden.value());  // [B, T, V]
      std::copy_n(logits.f32(), batch * len * V, all_logits.f32() + k * batch * len * V);
    }
    const nn::HeadLoss head = model.head().loss(hidden, tgt, cfg.padding_idx, nn::LossUse::Training);
    autograd::Var loss = head.loss;
    sample_sizes.f32()[k] = static_cast<float>(head.sample_size);
    if (autograd::Var aux = model.aux_loss(); aux.defined()) {  // as train_update adds it
      aux_losses.f32()[k] = aux.value().f32()[0];
      loss = autograd::add(loss, aux);
    }
    for (const auto& [key, value] : model.train_metrics()) {
      if (!metrics.count(key)) metrics[key] = Tensor::zeros({segments});
      metrics[key].f32()[k] = static_cast<float>(value);
    }
    autograd::tape().backward(loss);
    losses.f32()[k] = head.loss.value().f32()[0];
    std::copy_n(src.i32(), batch * len, all_src.i32() + k * batch * len);
    std::copy_n(tgt.i32(), batch * len, all_tgt.i32() + k * batch * len);
  }
  NamedTensors out = {{"src_tokens", all_src}, {"target", all_tgt}, {"logits", all_logits}, {"loss", losses},
                      {"aux_loss", aux_losses}, {"sample_size", sample_sizes}};
  for (const auto& [key, t] : metrics) out.emplace_back("metric." + key, t);
  for (const auto& [name, var] : model.params().items()) out.emplace_back("grad." + name, var.grad());
  save_safetensors(dump, out, {{"config", model.config_json().dump()}, {"segments", std::to_string(segments)}});
  std::cout << "segments " << segments << ", last loss " << losses.f32()[segments - 1] << "\n";
  return 0;
}

int trajectory(models::LanguageModel& model, const std::string& opt_path, int64_t steps, int64_t batch, int64_t len,
               int64_t pad, uint64_t seed, const std::string& batches_path, const std::string& losses_path) {
  std::ifstream in(opt_path);
  if (!in) fail_input(opt_path, "cannot open the optimizer config");
  const nlohmann::json opt_json = nlohmann::json::parse(in);
  int64_t max_update = 0;
  const train::OptimSettings settings = optim_settings(opt_json, &max_update);
  auto optimizer = train::make_optimizer(settings);
  auto schedule = train::make_scheduler(settings, max_update);
  const models::ModelInfo cfg = model.info();

  Rng rng(seed, 77);
  Tensor all_src = Tensor::empty({steps, batch, len}, DType::I32), all_tgt = Tensor::empty({steps, batch, len}, DType::I32);
  train::TrainState state;
  const train::UpdateParams params{.clip_norm = settings.clip_norm, .seed = seed, .pad = cfg.padding_idx};
  nlohmann::json losses = nlohmann::json::array();
  for (int64_t s = 0; s < steps; ++s) {
    train::LmBatch b{Tensor::empty({batch, len}, DType::I32), Tensor::empty({batch, len}, DType::I32), 0};
    random_batch(rng, cfg, pad, b.src, b.tgt);
    for (int64_t i = 0; i < batch * len; ++i) b.ntokens += b.tgt.i32()[i] != cfg.padding_idx;
    std::copy_n(b.src.i32(), batch * len, all_src.i32() + s * batch * len);
    std::copy_n(b.tgt.i32(), batch * len, all_tgt.i32() + s * batch * len);
    const train::UpdateResult r =
        train::train_update(model, std::span<const train::LmBatch>(&b, 1), *optimizer, *schedule, state, params,
                            dist::World::get());
    if (!r.applied()) fail_input("update " + std::to_string(s + 1), "non-finite loss or gradient");
    losses.push_back({{"loss", r.loss_sum / r.ntokens / std::log(2.0)}, {"lr", r.lr}, {"gnorm", r.gnorm}});
  }
  save_safetensors(batches_path, {{"src_tokens", all_src}, {"target", all_tgt}});
  std::ofstream(losses_path) << losses.dump(1) << "\n";
  std::cout << "trajectory: " << steps << " updates, last loss " << losses.back()["loss"] << " bits\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stretch parity dump"};
  std::string model_json = "{}", checkpoint, dump, trajectory_opt, batches, losses;
  int64_t batch = 2, len = 16, pad = 0, steps = 20, segments = 1, masked_lm = 0;
  uint64_t seed = 1;
  uint64_t step = 0;
  float bias_noise = 0.f, normformer_noise = 0.f;
  app.add_option("--model-json", model_json,
                 "model config (fairseq names) over the preset of its \"arch\" (default transformer_lm_tiny)");
  app.add_option("--batch", batch);
  app.add_option("--len", len);
  app.add_option("--pad", pad, "right-pad the last row of each batch with this many pad tokens");
  app.add_option("--seed", seed);
  app.add_option("--step", step, "model dump: the update number of the forward pass (ALiBi slope warm-up)");
  app.add_option("--checkpoint", checkpoint, "the initial model")->required();
  app.add_option("--dump", dump, "model dump output");
  app.add_option("--masked-lm", masked_lm,
                 "model dump: targets are pad except every K-th position, whose input is <mask> (the last id)");
  app.add_option("--bias-noise", bias_noise,
                 "after init, add uniform(-S, S) to every parameter whose name ends in 'bias' (biases initialised to 0 "
                 "would hide a wrong bias slice)");
  app.add_option("--normformer-noise", normformer_noise,
                 "after init, add uniform(-S, S) to NormFormer's c_attn, w_resid, attn_ln.*, ffn_layernorm.*");
  app.add_option("--segments", segments, "model dump over K consecutive batches through the training memory");
  app.add_option("--trajectory", trajectory_opt, "optimizer config JSON: run --steps updates instead");
  app.add_option("--steps", steps);
  app.add_option("--batches", batches, "trajectory: batches output");
  app.add_option("--losses", losses, "trajectory: per-update loss/lr/gnorm output");
  CLI11_PARSE(app, argc, argv);
  try {
    if (trajectory_opt.empty() == dump.empty())
      fail_usage("give exactly one of --dump (model dump) and --trajectory OPT.json");
    if (!trajectory_opt.empty() && (batches.empty() || losses.empty()))
      fail_usage("--trajectory needs --batches and --losses");
    if (pad < 0 || pad >= len) fail_usage("--pad must be in [0, --len)");
    nlohmann::json given = nlohmann::json::parse(model_json);
    const std::string arch = given.value("arch", std::string("transformer_lm_tiny"));
    given.erase("arch");
    nlohmann::json cfg = models::resolve_config(arch, {{"dropout", 0.0}}, 512);
    cfg = models::apply_overrides(cfg, given, models::OverrideUse::Training, "--model-json");
    std::unique_ptr<models::LanguageModel> model_ptr = models::build_model(cfg);
    models::LanguageModel& model = *model_ptr;
    model.init(seed);
    if (bias_noise > 0.f) {
      Rng rng(seed, /*stream=*/0xb1a5);
      for (const auto& [name, v] : model.params().items())
        if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0)
          for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += rng.uniform(-bias_noise, bias_noise);
    }
    if (normformer_noise > 0.f) {
      Rng rng(seed, /*stream=*/0x4f4d);
      for (const auto& [name, v] : model.params().items())
        for (const char* piece : {".c_attn", ".w_resid", ".attn_ln.", ".ffn_layernorm."})
          if (name.find(piece) != std::string::npos)
            for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += rng.uniform(-normformer_noise, normformer_noise);
    }
    train::save_checkpoint(checkpoint, model, {.dict_hash = "parity"});
    if (!dump.empty() && segments > 1) return segments_dump(model, segments, batch, len, pad, seed, dump);
    if (!dump.empty()) return model_dump(model, batch, len, pad, seed, step, masked_lm, dump);
    return trajectory(model, trajectory_opt, steps, batch, len, pad, seed, batches, losses);
  } catch (const std::exception& e) {
    std::cerr << "stretch_parity_dump: " << e.what() << "\n";
    return 1;
  }
}
