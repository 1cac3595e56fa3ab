#include "train/checkpoint.h"

#include <filesystem>

#include "core/error.h"
#include "optim/optimizer.h"

namespace stretch::train {

namespace {
constexpr const char* kFormat = "stretch-checkpoint-1";
}

nlohmann::json TrainState::to_json() const {
  return {{"num_updates", num_updates},
          {"epoch", epoch},
          {"next_batch", next_batch},
          {"best_loss", std::isnan(best_loss) ? nlohmann::json(nullptr) : nlohmann::json(best_loss)},
          {"epoch_loss_sum", epoch_loss_sum},
          {"epoch_ntokens", epoch_ntokens},
          {"seed", seed}};
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
    s.seed = j.at("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail_input(source, std::string("train_state in the metadata is incomplete: ") + e.what(),
               "the file was not written by this version of `stretch train`; restore an earlier checkpoint");
  }
  if (s.num_updates < 0 || s.epoch < 1 || s.next_batch < 0)
    fail_input(source, "train_state " + j.dump() + " is impossible", "restore an earlier checkpoint");
  return s;
}

void save_checkpoint(const std::string& path, const models::TransformerLM& model, const nlohmann::json& config,
                     const std::string& dict_hash, const TrainState& state, const optim::Optimizer* optimizer) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, var] : model.params().items()) tensors.emplace_back(name, var.value());
  nlohmann::json opt_scalars = nlohmann::json::object();
  if (optimizer) {
    optim::OptimizerState st = optimizer->state_dict();
    for (auto& [name, t] : st.tensors) tensors.emplace_back("optimizer." + name, t);
    opt_scalars = st.scalars;
  }
  std::map<std::string, std::string> meta;
  meta["format"] = kFormat;
  // fairseq argument names at the top level (the model's), the trainer's groups beside them.
  nlohmann::json cfg = config.is_object() ? config : nlohmann::json::object();
  cfg.erase("model");
  const nlohmann::json model_json = model.config().to_json();
  for (auto& [key, value] : model_json.items()) cfg[key] = value;
  meta["config"] = cfg.dump();
  meta["dict_hash"] = dict_hash;
  meta["train_state"] = state.to_json().dump();
  meta["optimizer"] = opt_scalars.dump();
  save_safetensors(path, tensors, meta);
}

CheckpointContents read_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::filesystem::path p(path);
    fail_input(path, "checkpoint not found", "check --path / --save-dir; stretch writes checkpoint_last.pt and checkpoint_best.pt");
  }
  CheckpointContents c;
  c.file = load_safetensors(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = c.file.metadata.find(key);
    if (it == c.file.metadata.end())
      fail_input(path, std::string("not a stretch checkpoint (no '") + key + "' in the safetensors metadata)",
                 "stretch reads checkpoints written by `stretch train`; fairseq's pickled .pt files are not read");
    return it->second;
  };
  if (meta("format") != kFormat)
    fail_input(path, "unsupported checkpoint format '" + meta("format") + "'", std::string("this build reads ") + kFormat);
  try {
    c.config = nlohmann::json::parse(meta("config"));
    nlohmann::json model_json = nlohmann::json::object();
    for (auto& [key, value] : c.config.items())
      if (models::TransformerLMConfig::is_key(key)) model_json[key] = value;
    c.model = models::TransformerLMConfig::from_json(model_json);
    c.state = TrainState::from_json(nlohmann::json::parse(meta("train_state")), path);
    c.optimizer_scalars = nlohmann::json::parse(meta("optimizer"));
  } catch (const nlohmann::json::exception& e) {
    fail_input(path, std::string("corrupt checkpoint metadata: ") + e.what(), "restore an earlier checkpoint");
  }
  c.dict_hash = meta("dict_hash");
  return c;
}

void load_model_weights(models::TransformerLM& model, const CheckpointContents& ckpt) {
  const std::string& path = ckpt.file.path.empty() ? std::string("checkpoint") : ckpt.file.path;
  const std::string hint = "the checkpoint was written for another architecture: check --arch/--pos and the model "
                           "flags against its config (`stretch info CKPT`)";
  for (const auto& [name, var] : model.params().items()) {
    const Tensor* t = ckpt.file.find(name);
    if (!t) fail_input(path, "has no tensor '" + name + "' (the model needs it)", hint);
    if (t->shape() != var.shape() || t->dtype() != DType::F32)
      fail_input(path, "tensor '" + name + "' is " + safetensors_dtype_name(t->dtype()) + " " + t->shape().str() +
                           ", the model expects F32 " + var.shape().str(), hint);
    var.value().copy_from(*t);
  }
  for (const auto& [name, t] : ckpt.file.tensors)
    if (name.rfind("optimizer.", 0) != 0 && !model.params().contains(name))
      fail_input(path, "has tensor '" + name + "', which this model does not have", hint);
}

void check_same_architecture(const std::string& path, const models::TransformerLMConfig& saved,
                             const models::TransformerLMConfig& wanted) {
  using models::PosMethod;
  const nlohmann::json a = saved.to_json(), b = wanted.to_json();
  std::vector<std::string> keys = {"vocab_size", "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim",
                                   "decoder_attention_heads", "decoder_normalize_before", "no_decoder_final_norm",
                                   "share_decoder_input_output_embed", "no_scale_embedding", "activation_fn", "pos",
                                   "padding_idx"};
  if (wanted.pos == PosMethod::Learned) keys.push_back("max_target_positions");
  if (wanted.pos == PosMethod::T5) keys.insert(keys.end(), {"t5_num_buckets", "t5_max_distance"});
  if (wanted.pos == PosMethod::Rope) keys.push_back("rope_base");
  std::string diffs;
  for (const auto& k : keys)
    if (a.at(k) != b.at(k)) diffs += (diffs.empty() ? "" : ", ") + k + " " + a.at(k).dump() + " (this run: " + b.at(k).dump() + ")";
  if (!diffs.empty())
    fail_input(path, "was written for another model (--arch " + saved.arch + "): " + diffs,
               "resume with the model flags the checkpoint was trained with, or start afresh in another --save-dir");
}

std::unique_ptr<models::TransformerLM> load_model(const std::string& path, const nlohmann::json& overrides,
                                                  CheckpointContents* contents) {
  CheckpointContents c = read_checkpoint(path);
  models::TransformerLMConfig cfg = c.model;
  cfg.apply_overrides(overrides);
  auto model = std::make_unique<models::TransformerLM>(cfg);
  try {
    load_model_weights(*model, c);
  } catch (const Error& e) {
    fail_input(path, e.what());
  }
  if (contents) *contents = std::move(c);
  return model;
}

}  // namespace stretch::train
