#include "train/checkpoint.h"

#include <filesystem>

#include "core/error.h"
#include "ops/gemm.h"
#include "optim/optimizer.h"
#include "tensor/torch_file.h"

namespace stretch::train {

nlohmann::json TrainState::to_json() const {
  nlohmann::json metrics = nlohmann::json::array();
  for (const auto& [name, sum] : epoch_metric_sums) metrics.push_back({name, sum});
  return {{"num_updates", num_updates},
          {"epoch_metric_sums", metrics},
          {"epoch", epoch},
          {"next_batch", next_batch},
          {"best_loss", std::isnan(best_loss) ? nlohmann::json(nullptr) : nlohmann::json(best_loss)},
          {"epoch_loss_sum", epoch_loss_sum},
          {"epoch_ntokens", epoch_ntokens},
          {"epoch_nsentences", epoch_nsentences},
          {"epoch_gnorm_sum", epoch_gnorm_sum},
          {"epoch_clip_count", epoch_clip_count},
          {"epoch_updates", epoch_updates},
          {"seed", seed},
          {"lr_plateau", lr_plateau.to_json()},
          {"ema_update_counter", ema_update_counter},
          {"bf16_products", bf16_products}};
}

void TrainState::begin_next_epoch() {
  epoch += 1;
  next_batch = 0;
  epoch_loss_sum = epoch_ntokens = epoch_nsentences = epoch_gnorm_sum = epoch_clip_count = 0;
  epoch_updates = 0;
  epoch_metric_sums.clear();
}

nlohmann::json TrainClock::to_json() const {
  return {{"train_wall", train_wall}, {"epoch_train_wall", epoch_train_wall}, {"epoch_elapsed", epoch_elapsed}};
}

TrainClock TrainClock::from_json(const nlohmann::json& j) {
  TrainClock c;
  if (!j.is_object()) return c;
  c.train_wall = j.value("train_wall", 0.0);
  c.epoch_train_wall = j.value("epoch_train_wall", 0.0);
  c.epoch_elapsed = j.value("epoch_elapsed", 0.0);
  return c;
}

TrainState TrainState::from_json(const nlohmann::json& j, const std::string& source) {
  TrainState s;
  try {
    s.num_updates = j.at("num_updates").get<int64_t>();
    s.epoch = j.at("epoch").get<int64_t>();
    s.next_batch = j.at("next_batch").get<int64_t>();
    s.best_loss = j.at("best_loss").is_null() ? NAN : j.at("best_loss").get<double>();
    s.epoch_loss_sum = j.at("epoch_loss_sum").get<double>();
    s.epoch_ntokens = j.at("epoch_ntokens").get<double>();
    s.epoch_nsentences = j.value("epoch_nsentences", 0.0);
    s.epoch_gnorm_sum = j.value("epoch_gnorm_sum", 0.0);
    s.epoch_clip_count = j.value("epoch_clip_count", 0.0);
    s.epoch_updates = j.value("epoch_updates", int64_t{0});
    if (j.contains("epoch_metric_sums"))  // absent in files written before it: empty
      for (const auto& m : j.at("epoch_metric_sums")) s.epoch_metric_sums.emplace_back(m.at(0).get<std::string>(), m.at(1).get<double>());
    s.seed = j.at("seed").get<uint64_t>();
    s.ema_update_counter = j.value("ema_update_counter", int64_t{0});  // absent in files written before it
    s.bf16_products = j.value("bf16_products", std::string());           // the same
    if (j.contains("lr_plateau")) s.lr_plateau = optim::PlateauState::from_json(j.at("lr_plateau"), source);
  } catch (const nlohmann::json::exception& e) {
    fail_input(source, std::string("train_state in the metadata is incomplete: ") + e.what(),
               "the file was not written by this version of `stretch train`; restore an earlier checkpoint");
  }
  ops::Bf16Products parsed;
  if (!s.bf16_products.empty() && !ops::parse_bf16_products(s.bf16_products, &parsed))
    fail_input(source, "train_state's bf16_products is '" + s.bf16_products + "', not native, fp32 or native-fp32-attention",
               "restore an earlier checkpoint");
  if (s.num_updates < 0 || s.epoch < 1 || s.next_batch < 0)
    fail_input(source, "train_state " + j.dump() + " is impossible", "restore an earlier checkpoint");
  return s;
}

void save_checkpoint(const std::string& path, const models::LanguageModel& model, const CheckpointSave& what) {
  models::ModelFileWrite w;
  w.format = models::kCheckpointFormat;
  w.config = what.config;
  w.dict_hash = what.dict_hash;
  w.dictionary = what.dictionary;
  nlohmann::json opt_scalars = nullptr;  // --no-save-optimizer-state: none (a resume restarts the optimizer)
  if (what.optimizer) {
    optim::OptimizerState st = what.optimizer->state_dict();
    for (auto& [name, t] : st.tensors) w.extra_tensors.emplace_back("optimizer." + name, t);
    opt_scalars = st.scalars;
  }
  if (what.segment)
    for (auto& [name, t] : what.segment->save()) w.extra_tensors.emplace_back("segment." + name, t);
  for (const auto& [name, t] : what.ema) w.extra_tensors.emplace_back(name, t);  // "ema.<parameter>" (train/ema.h)
  w.extra_meta["train_state"] = what.state.to_json().dump();
  w.extra_meta["optimizer"] = opt_scalars.dump();
  w.extra_meta["train_clock"] = what.clock.to_json().dump();
  models::write_model_file(path, model, w);
}

CheckpointContents read_checkpoint(const std::string& path) {
  if (const std::string kind = torch_file_kind(path); !kind.empty())
    fail_input(path, "is a PyTorch checkpoint (" + kind + "): stretch train cannot resume fairseq's training state "
                     "(its optimizer, lr scheduler and data position are not imported)",
               "fine-tune from its weights with --finetune-from-model " + path +
                   " (or --restore-file with --reset-optimizer --reset-dataloader): the optimizer, schedule and "
                   "update count then start afresh, as fairseq's --finetune-from-model does");
  CheckpointContents c;
  static_cast<models::ModelFile&>(c) = models::read_model_file(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = c.file.metadata.find(key);
    if (it == c.file.metadata.end() || c.format != models::kCheckpointFormat)
      fail_input(path, std::string("is a model file without training state (no '") + key + "')",
                 "resume from a checkpoint written by `stretch train` (checkpoint_last.pt), or start afresh");
    return it->second;
  };
  try {
    c.state = TrainState::from_json(nlohmann::json::parse(meta("train_state")), path);
    c.optimizer_scalars = nlohmann::json::parse(meta("optimizer"));
    if (auto it = c.file.metadata.find("train_clock"); it != c.file.metadata.end())
      c.clock = TrainClock::from_json(nlohmann::json::parse(it->second));
  } catch (const nlohmann::json::exception& e) {
    fail_input(path, std::string("corrupt checkpoint metadata: ") + e.what(), "restore an earlier checkpoint");
  }
  return c;
}

NamedTensors segment_tensors(const CheckpointContents& ckpt) {
  NamedTensors out;
  for (const auto& [name, t] : ckpt.file.tensors)
    if (name.rfind("segment.", 0) == 0) out.emplace_back(name.substr(8), t);
  return out;
}

void check_same_architecture(const std::string& path, const nlohmann::json& saved, const nlohmann::json& wanted) {
  const std::string diffs = models::structural_differences(saved, wanted);
  if (!diffs.empty())
    fail_input(path, "was written for another model (--arch " + saved.value("arch", std::string("?")) + "): " + diffs,
               "resume with the model flags the checkpoint was trained with, or start afresh in another --save-dir");
}

}  // namespace stretch::train
