// models/transformer_lm/config.cpp — the transformer_lm field table, presets and checks.
#include "models/transformer_lm/config.h"

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

namespace {
const char* activation_name(ops::Activation a) { return a == ops::Activation::Gelu ? "gelu" : "relu"; }
ops::Activation parse_activation(const std::string& a) {
  if (a == "relu") return ops::Activation::Relu;
  if (a == "gelu") return ops::Activation::Gelu;
  fail_usage("--activation-fn: unknown activation '" + a + "'", "use relu or gelu");
}
}  // namespace

const std::vector<Field<TransformerLMConfig>>& TransformerLMConfig::fields() {
  using C = TransformerLMConfig;
  using R = FieldRole;
  using namespace fields;
  static const std::vector<Field<C>> table = {
      text(&C::arch, {.key = "arch", .role = R::Free}),
      number(&C::vocab_size, {.key = "vocab_size", .help = "from dict.txt"}),
      number(&C::decoder_layers, {.key = "decoder_layers", .flag = "--decoder-layers", .help = "blocks L"}),
      number(&C::decoder_embed_dim, {.key = "decoder_embed_dim", .flag = "--decoder-embed-dim", .help = "model dim C"}),
      number(&C::decoder_ffn_embed_dim,
             {.key = "decoder_ffn_embed_dim", .flag = "--decoder-ffn-embed-dim", .help = "FFN inner dim"}),
      number(&C::decoder_attention_heads,
             {.key = "decoder_attention_heads", .flag = "--decoder-attention-heads", .help = "heads H"}),
      boolean(&C::decoder_normalize_before, {.key = "decoder_normalize_before", .flag = "--decoder-normalize-before",
                                             .help = "pre-norm blocks (the default)"}),
      boolean(&C::no_decoder_final_norm, {.key = "no_decoder_final_norm", .flag = "--no-decoder-final-norm",
                                          .help = "no LayerNorm after the last pre-norm block"}),
      boolean(&C::share_decoder_input_output_embed,
              {.key = "share_decoder_input_output_embed", .flag = "--share-decoder-input-output-embed",
               .help = "tie the output projection to the token embedding"}),
      boolean(&C::no_scale_embedding,
              {.key = "no_scale_embedding", .flag = "--no-scale-embedding", .help = "no sqrt(C) embedding scale"}),
      choice(&C::activation_fn, activation_name, parse_activation, {ops::Activation::Relu, ops::Activation::Gelu},
             {.key = "activation_fn", .flag = "--activation-fn", .help = "FFN activation"}),
      choice(&C::pos, pos_method_name, parse_pos_method,
             {PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope, PosMethod::T5,
              PosMethod::None},
             {.key = "pos", .flag = "--pos", .help = "position method: alibi (default) | sinusoidal | learned | rope | t5 | none"}),
      number(&C::tokens_per_sample, {.key = "tokens_per_sample", .role = R::Free}),
      when(number(&C::max_target_positions, {.key = "max_target_positions", .flag = "--max-target-positions",
                                             .help = "learned-position table size (default: --tokens-per-sample)"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::Learned; })),
      number(&C::dropout, {.key = "dropout", .flag = "--dropout", .role = R::Free}),
      number(&C::attention_dropout, {.key = "attention_dropout", .flag = "--attention-dropout", .role = R::Free}),
      number(&C::activation_dropout,
             {.key = "activation_dropout", .flag = "--activation-dropout,--relu-dropout", .role = R::Free}),
      number(&C::padding_idx, {.key = "padding_idx", .help = "from dict.txt"}),
      when(number(&C::t5_num_buckets, {.key = "t5_num_buckets", .flag = "--t5-num-buckets"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::T5; })),
      when(number(&C::t5_max_distance, {.key = "t5_max_distance", .flag = "--t5-max-distance"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::T5; })),
      when(number(&C::rope_base, {.key = "rope_base", .flag = "--rope-base"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::Rope; })),
      number(&C::alibi_slope_scale, {.key = "alibi_slope_scale", .role = R::Evaluation}),
      number(&C::attention_window, {.key = "attention_window", .role = R::Evaluation}),
  };
  return table;
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

nlohmann::json TransformerLMConfig::to_json() const { return fields::to_json(fields(), *this); }

TransformerLMConfig TransformerLMConfig::from_json(const nlohmann::json& j) {
  TransformerLMConfig c;
  c.apply_overrides(j, "model config");
  return c;
}

bool TransformerLMConfig::is_key(const std::string& key) { return fields::find(fields(), key) != nullptr; }

void TransformerLMConfig::apply_overrides(const nlohmann::json& j, const std::string& source) {
  // fairseq model/task args that size buffers in the ALiBi fork but mean nothing here.
  static const std::set<std::string> ignored = {"max_tokens", "max_sentences", "batch_size"};
  if (!j.is_object()) fail_usage(source + ": the model config must be an object, got " + j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (ignored.count(it.key())) {
      log_once(LogLevel::Info, "model override '" + it.key() + "' has no effect in stretch (buffers are sized per call)");
      continue;
    }
    if (!is_key(it.key()))
      fail_usage(source + ": unknown model config key '" + it.key() + "'",
                 "known keys: decoder_layers, decoder_embed_dim, tokens_per_sample, max_target_positions, pos, ...");
  }
  nlohmann::json known = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!ignored.count(it.key())) known[it.key()] = it.value();
  fields::apply(fields(), *this, known, source);
}

std::string structural_differences(const TransformerLMConfig& saved, const TransformerLMConfig& wanted) {
  return fields::structural_differences(TransformerLMConfig::fields(), saved, wanted);
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
  fail_usage("--arch: unknown architecture '" + arch + "'", "`stretch train --arch help` lists them");
}

bool is_preset(const std::string& arch) {
  return arch == "transformer_lm" || arch == "transformer_lm_wiki103" || arch == "transformer_lm_baevski_wiki103" ||
         arch == "transformer_lm_small" || arch == "transformer_lm_tiny";
}

}  // namespace stretch::models
