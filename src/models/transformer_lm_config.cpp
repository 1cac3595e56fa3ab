#include "models/transformer_lm_config.h"

#include <set>

#include "core/error.h"
#include "core/log.h"

namespace stretch::models {

const char* pos_method_name(PosMethod p) {
  switch (p) {
    case PosMethod::Alibi: return "alibi";
    case PosMethod::Sinusoidal: return "sinusoidal";
    case PosMethod::Learned: return "learned";
    case PosMethod::Rope: return "rope";
    case PosMethod::T5: return "t5";
    case PosMethod::None: return "none";
  }
  return "?";
}

PosMethod parse_pos_method(const std::string& s) {
  for (PosMethod p : {PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope, PosMethod::T5,
                      PosMethod::None})
    if (s == pos_method_name(p)) return p;
  fail_usage("--pos: unknown position method '" + s + "'", "use one of alibi, sinusoidal, learned, rope, t5, none");
}

void TransformerLMConfig::validate() const {
  // Every message names the flag, the config key (--model-overrides, --config, a checkpoint's
  // stored config), the value and what is allowed. Sizes are checked before anything divides by them.
  auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  auto bad = [](const char* flag, const char* key, const std::string& value, const std::string& allowed) {
    if (flag == nullptr) fail_usage(std::string("model config key '") + key + "' is " + value + ": " + allowed);
    fail_usage(std::string(flag) + " " + value + " (model config key '" + key + "'): " + allowed);
  };
  auto at_least = [&](int64_t v, int64_t min, const char* flag, const char* key, const std::string& what) {
    if (v < min) bad(flag, key, std::to_string(v), "must be an integer >= " + std::to_string(min) + " (" + what + ")");
  };
  if (vocab_size <= 0) fail_usage("model: vocab_size must be positive (is the dictionary empty?)");
  at_least(decoder_layers, 1, "--decoder-layers", "decoder_layers", "the number of decoder blocks");
  at_least(decoder_embed_dim, 1, "--decoder-embed-dim", "decoder_embed_dim", "the model width C");
  at_least(decoder_ffn_embed_dim, 1, "--decoder-ffn-embed-dim", "decoder_ffn_embed_dim", "the feed-forward width F");
  at_least(decoder_attention_heads, 1, "--decoder-attention-heads", "decoder_attention_heads",
           "the number of heads H; C must be a multiple of it");
  if (decoder_embed_dim % decoder_attention_heads != 0)
    fail_usage("--decoder-embed-dim " + std::to_string(decoder_embed_dim) + " is not divisible by --decoder-attention-heads " +
               std::to_string(decoder_attention_heads));
  if (pos == PosMethod::Rope && head_dim() % 2 != 0)
    fail_usage("--pos rope needs an even head dimension, got " + std::to_string(head_dim()));
  at_least(tokens_per_sample, 1, "--tokens-per-sample", "tokens_per_sample", "the training block length");
  at_least(max_target_positions, 1, "--max-target-positions", "max_target_positions", "the learned-position table size");
  if (pos == PosMethod::T5) {
    at_least(t5_num_buckets, 2, "--t5-num-buckets", "t5_num_buckets", "T5 uses 32");
    at_least(t5_max_distance, t5_num_buckets / 2 + 1, "--t5-max-distance", "t5_max_distance",
             "it must exceed --t5-num-buckets / 2; T5 uses 128");
  }
  if (!(rope_base > 1.f) || !std::isfinite(rope_base))
    bad("--rope-base", "rope_base", text(rope_base), "must be a finite number > 1 (RoPE's theta; 10000 is the default)");
  const std::pair<const char*, const char*> dropout_names[] = {{"--dropout", "dropout"},
                                                               {"--attention-dropout", "attention_dropout"},
                                                               {"--activation-dropout", "activation_dropout"}};
  const float probs[] = {dropout, attention_dropout, activation_dropout};
  for (int i = 0; i < 3; ++i)
    if (!(probs[i] >= 0.f && probs[i] < 1.f))  // NaN fails both comparisons
      bad(dropout_names[i].first, dropout_names[i].second, text(probs[i]), "must be a probability in [0, 1)");
  if (!(alibi_slope_scale > 0.f) || !std::isfinite(alibi_slope_scale))
    bad(nullptr, "alibi_slope_scale", text(alibi_slope_scale), "must be a finite number > 0");
  if (attention_window < 0)
    bad(nullptr, "attention_window", std::to_string(attention_window), "must be an integer >= 0 (0: unlimited)");
}

nlohmann::json TransformerLMConfig::to_json() const {
  return {{"arch", arch},
          {"vocab_size", vocab_size},
          {"decoder_layers", decoder_layers},
          {"decoder_embed_dim", decoder_embed_dim},
          {"decoder_ffn_embed_dim", decoder_ffn_embed_dim},
          {"decoder_attention_heads", decoder_attention_heads},
          {"decoder_normalize_before", decoder_normalize_before},
          {"no_decoder_final_norm", no_decoder_final_norm},
          {"share_decoder_input_output_embed", share_decoder_input_output_embed},
          {"no_scale_embedding", no_scale_embedding},
          {"activation_fn", activation_fn == ops::Activation::Gelu ? "gelu" : "relu"},
          {"pos", pos_method_name(pos)},
          {"tokens_per_sample", tokens_per_sample},
          {"max_target_positions", max_target_positions},
          {"dropout", dropout},
          {"attention_dropout", attention_dropout},
          {"activation_dropout", activation_dropout},
          {"padding_idx", padding_idx},
          {"t5_num_buckets", t5_num_buckets},
          {"t5_max_distance", t5_max_distance},
          {"rope_base", rope_base},
          {"alibi_slope_scale", alibi_slope_scale},
          {"attention_window", attention_window}};
}

namespace {
template <typename T>
void read(const nlohmann::json& j, const char* key, T& out) {
  if (j.contains(key)) out = j.at(key).get<T>();
}
// fairseq writes booleans as true/false; --model-overrides from a Python literal may give 0/1.
void read_bool(const nlohmann::json& j, const char* key, bool& out) {
  if (!j.contains(key)) return;
  const auto& v = j.at(key);
  out = v.is_boolean() ? v.get<bool>() : v.get<int>() != 0;
}
}  // namespace

TransformerLMConfig TransformerLMConfig::from_json(const nlohmann::json& j) {
  TransformerLMConfig c;
  c.apply_overrides(j);
  return c;
}

namespace {
const std::set<std::string>& model_keys() {
  static const std::set<std::string> known = {
      "arch", "vocab_size", "decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads",
      "decoder_normalize_before", "no_decoder_final_norm", "share_decoder_input_output_embed", "no_scale_embedding",
      "activation_fn", "pos", "tokens_per_sample", "max_target_positions", "dropout", "attention_dropout",
      "activation_dropout", "padding_idx", "t5_num_buckets", "t5_max_distance", "rope_base", "alibi_slope_scale",
      "attention_window"};
  return known;
}
}  // namespace

bool TransformerLMConfig::is_key(const std::string& key) { return model_keys().count(key) > 0; }

void TransformerLMConfig::apply_overrides(const nlohmann::json& j) {
  const std::set<std::string>& known = model_keys();
  // fairseq model/task args that size buffers in the ALiBi fork but mean nothing here.
  static const std::set<std::string> ignored = {"max_tokens", "max_sentences", "batch_size"};
  try {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (ignored.count(it.key())) {
        log_once(LogLevel::Info, "model override '" + it.key() + "' has no effect in stretch (buffers are sized per call)");
        continue;
      }
      if (!known.count(it.key()))
        fail_usage("unknown model config key '" + it.key() + "'",
                   "known keys: decoder_layers, decoder_embed_dim, tokens_per_sample, max_target_positions, pos, ...");
    }
    read(j, "arch", arch);
    read(j, "vocab_size", vocab_size);
    read(j, "decoder_layers", decoder_layers);
    read(j, "decoder_embed_dim", decoder_embed_dim);
    read(j, "decoder_ffn_embed_dim", decoder_ffn_embed_dim);
    read(j, "decoder_attention_heads", decoder_attention_heads);
    read_bool(j, "decoder_normalize_before", decoder_normalize_before);
    read_bool(j, "no_decoder_final_norm", no_decoder_final_norm);
    read_bool(j, "share_decoder_input_output_embed", share_decoder_input_output_embed);
    read_bool(j, "no_scale_embedding", no_scale_embedding);
    if (j.contains("activation_fn")) {
      std::string a = j.at("activation_fn").get<std::string>();
      if (a == "relu") activation_fn = ops::Activation::Relu;
      else if (a == "gelu") activation_fn = ops::Activation::Gelu;
      else fail_usage("--activation-fn: unknown activation '" + a + "'", "use relu or gelu");
    }
    if (j.contains("pos")) pos = parse_pos_method(j.at("pos").get<std::string>());
    read(j, "tokens_per_sample", tokens_per_sample);
    read(j, "max_target_positions", max_target_positions);
    read(j, "dropout", dropout);
    read(j, "attention_dropout", attention_dropout);
    read(j, "activation_dropout", activation_dropout);
    read(j, "padding_idx", padding_idx);
    read(j, "t5_num_buckets", t5_num_buckets);
    read(j, "t5_max_distance", t5_max_distance);
    read(j, "rope_base", rope_base);
    read(j, "alibi_slope_scale", alibi_slope_scale);
    read(j, "attention_window", attention_window);
  } catch (const nlohmann::json::exception& e) {
    fail_usage(std::string("model config: ") + e.what(), "check the value types in the config or --model-overrides");
  }
}

TransformerLMConfig preset(const std::string& arch) {
  TransformerLMConfig c;
  c.arch = arch;
  if (arch == "transformer_lm") return c;
  if (arch == "transformer_lm_wiki103" || arch == "transformer_lm_baevski_wiki103") {
    c.decoder_layers = 16;
    c.decoder_embed_dim = 1024;
    c.decoder_ffn_embed_dim = 4096;
    c.decoder_attention_heads = 8;
    c.no_decoder_final_norm = true;
    c.dropout = 0.3f;
    c.attention_dropout = 0.1f;
    c.activation_dropout = 0.1f;
    return c;
  }
  if (arch == "transformer_lm_small") {
    c.decoder_layers = 4;
    c.decoder_embed_dim = 256;
    c.decoder_ffn_embed_dim = 1024;
    c.decoder_attention_heads = 4;
    return c;
  }
  if (arch == "transformer_lm_tiny") {
    c.decoder_layers = 2;
    c.decoder_embed_dim = 128;
    c.decoder_ffn_embed_dim = 512;
    c.decoder_attention_heads = 4;
    return c;
  }
  fail_usage("--arch: unknown architecture '" + arch + "'",
             "use transformer_lm, transformer_lm_wiki103, transformer_lm_small or transformer_lm_tiny");
}

bool is_preset(const std::string& arch) {
  return arch == "transformer_lm" || arch == "transformer_lm_wiki103" || arch == "transformer_lm_baevski_wiki103" ||
         arch == "transformer_lm_small" || arch == "transformer_lm_tiny";
}

}  // namespace stretch::models
