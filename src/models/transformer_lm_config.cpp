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
  if (vocab_size <= 0) fail_usage("model: vocab_size must be positive (is the dictionary empty?)");
  if (decoder_embed_dim % decoder_attention_heads != 0)
    fail_usage("--decoder-embed-dim " + std::to_string(decoder_embed_dim) + " is not divisible by --decoder-attention-heads " +
               std::to_string(decoder_attention_heads));
  if (pos == PosMethod::Rope && head_dim() % 2 != 0)
    fail_usage("--pos rope needs an even head dimension, got " + std::to_string(head_dim()));
  if (decoder_layers <= 0 || decoder_ffn_embed_dim <= 0) fail_usage("model: layers and ffn dim must be positive");
  for (float p : {dropout, attention_dropout, activation_dropout})
    if (p < 0.f || p >= 1.f) fail_usage("dropout probabilities must be in [0, 1)");
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
