// models/roberta/config.cpp — the roberta field table, presets and checks.
#include "models/roberta/config.h"

#include <cmath>

#include "core/error.h"
#include "models/activation_field.h"
#include "models/apply_model_config.h"
#include "models/transformer_lm/config.h"

namespace stretch::models {

const char* encoder_pos_name(EncoderPos p) {
  switch (p) {
    case EncoderPos::Alibi: return "alibi";
    case EncoderPos::Sinusoidal: return "sinusoidal";
    case EncoderPos::Learned: return "learned";
    case EncoderPos::None: return "none";
  }
  return "?";
}

EncoderPos parse_encoder_pos(const std::string& s) {
  for (EncoderPos p : {EncoderPos::Alibi, EncoderPos::Sinusoidal, EncoderPos::Learned, EncoderPos::None})
    if (s == encoder_pos_name(p)) return p;
  fail_usage("--pos " + s + ": the roberta encoder has no position method '" + s + "'",
             "use one of alibi (symmetric, the default), sinusoidal, learned, none");
}

const char* encoder_criterion_name(EncoderCriterion) { return "masked_lm"; }

EncoderCriterion parse_encoder_criterion(const std::string& s) {
  if (s == "masked_lm") return EncoderCriterion::MaskedLm;
  fail_usage("--criterion " + s + ": the roberta encoder is trained with the masked_lm criterion",
             "use --criterion masked_lm (or leave it out) with --task masked_lm");
}

const std::vector<Field<RobertaConfig>>& RobertaConfig::fields() {
  using C = RobertaConfig;
  using R = FieldRole;
  using namespace fields;
  static const std::vector<Field<C>> table = {
      text(&C::arch, {.key = "arch", .role = R::Free}),
      number(&C::vocab_size, {.key = "vocab_size", .help = "from dict.txt (+ <mask>)"}),
      number(&C::padding_idx, {.key = "padding_idx"}),
      number(&C::encoder_layers, {.key = "encoder_layers", .flag = "--encoder-layers", .help = "encoder blocks L"}),
      number(&C::encoder_embed_dim, {.key = "encoder_embed_dim", .flag = "--encoder-embed-dim", .help = "encoder dim C"}),
      number(&C::encoder_ffn_embed_dim,
             {.key = "encoder_ffn_embed_dim", .flag = "--encoder-ffn-embed-dim", .help = "encoder FFN inner dim"}),
      number(&C::encoder_attention_heads,
             {.key = "encoder_attention_heads", .flag = "--encoder-attention-heads", .help = "encoder heads H"}),
      boolean(&C::encoder_normalize_before,
              {.key = "encoder_normalize_before", .flag = "--encoder-normalize-before",
               .help = "pre-norm encoder blocks and a final LayerNorm (RoBERTa's default: post-norm)"}),
      activation_field(&C::activation_fn),
      choice(&C::pos, encoder_pos_name, parse_encoder_pos,
             {EncoderPos::Alibi, EncoderPos::Sinusoidal, EncoderPos::Learned, EncoderPos::None},
             {.key = "pos", .flag = "--pos", .help = "position method"}),
      number(&C::tokens_per_sample, {.key = "tokens_per_sample", .role = R::Free}),
      when(number(&C::max_positions, {.key = "max_positions", .flag = "--max-positions",
                                      .help = "roberta: learned-position table size (default: --tokens-per-sample)"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == EncoderPos::Learned; })),
      number(&C::dropout, {.key = "dropout", .flag = "--dropout", .role = R::Free}),
      number(&C::attention_dropout, {.key = "attention_dropout", .flag = "--attention-dropout", .role = R::Free}),
      number(&C::activation_dropout,
             {.key = "activation_dropout", .flag = "--activation-dropout,--relu-dropout", .role = R::Free}),
      when(boolean(&C::alibi_learnable_slopes,
                   {.key = "alibi_learnable_slopes", .flag = "--alibi-learnable-slopes",
                    .help = "ALiBi: slopes are parameters (per layer, initialised from the rule)"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == EncoderPos::Alibi; })),
      number(&C::alibi_slope_scale, {.key = "alibi_slope_scale", .role = R::Evaluation}),
      choice(&C::criterion, encoder_criterion_name, parse_encoder_criterion, {EncoderCriterion::MaskedLm},
             {.key = "criterion", .flag = "--criterion", .help = "masked_lm (roberta)", .role = R::Free}),
  };
  return table;
}

void RobertaConfig::validate() const {
  auto need = [](bool ok, const std::string& flag, const std::string& key, const std::string& value,
                 const std::string& allowed) {
    if (!ok) fail_usage(flag + " " + value + " (model config key '" + key + "'): " + allowed);
  };
  need(encoder_layers >= 1, "--encoder-layers", "encoder_layers", std::to_string(encoder_layers), "must be >= 1");
  need(encoder_layers < 4095, "--encoder-layers", "encoder_layers", std::to_string(encoder_layers),
       "at most 4094 layers have distinct dropout masks");
  need(encoder_embed_dim >= 1, "--encoder-embed-dim", "encoder_embed_dim", std::to_string(encoder_embed_dim), "must be >= 1");
  need(encoder_ffn_embed_dim >= 1, "--encoder-ffn-embed-dim", "encoder_ffn_embed_dim",
       std::to_string(encoder_ffn_embed_dim), "must be >= 1");
  need(encoder_attention_heads >= 1 && encoder_embed_dim % encoder_attention_heads == 0, "--encoder-attention-heads",
       "encoder_attention_heads", std::to_string(encoder_attention_heads),
       "must be >= 1 and divide --encoder-embed-dim " + std::to_string(encoder_embed_dim));
  need(tokens_per_sample >= 2, "--tokens-per-sample", "tokens_per_sample", std::to_string(tokens_per_sample),
       "masked_lm blocks are <s> + at least one token: >= 2");
  need(max_positions >= 1, "--max-positions", "max_positions", std::to_string(max_positions), "must be >= 1");
  for (auto [flag, key, p] : {std::tuple{"--dropout", "dropout", dropout},
                              std::tuple{"--attention-dropout", "attention_dropout", attention_dropout},
                              std::tuple{"--activation-dropout", "activation_dropout", activation_dropout}})
    need(p >= 0.f && p < 1.f, flag, key, std::to_string(p), "a probability in [0, 1)");
  need(!alibi_learnable_slopes || pos == EncoderPos::Alibi, "--alibi-learnable-slopes", "alibi_learnable_slopes",
       "true", "needs --pos alibi (this model has --pos " + std::string(encoder_pos_name(pos)) + ")");
  need(alibi_slope_scale > 0.f && std::isfinite(alibi_slope_scale), "--alibi-interpolate", "alibi_slope_scale",
       std::to_string(alibi_slope_scale), "must be a finite number > 0");
  if (vocab_size < 0) fail_usage("model config key 'vocab_size' is " + std::to_string(vocab_size) + ": must be >= 0");
}

nlohmann::json RobertaConfig::to_json() const { return fields::to_json(fields(), *this); }

RobertaConfig RobertaConfig::from_json(const nlohmann::json& j) {
  RobertaConfig c;
  c.apply_overrides(j, "model config");
  return c;
}

bool RobertaConfig::is_key(const std::string& key) { return fields::find(fields(), key) != nullptr; }

void RobertaConfig::apply_overrides(const nlohmann::json& j, const std::string& source) {
  // The decoder's ALiBi variant keys name their flag: the encoder has only symmetric ALiBi.
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (is_key(it.key()) || !TransformerLMConfig::is_key(it.key()) ||
          !(it.key().rfind("alibi_", 0) == 0 || it.key().rfind("pos_upper", 0) == 0))
        continue;
      const Field<TransformerLMConfig>* f = fields::find(TransformerLMConfig::fields(), it.key());
      const std::string flag = f != nullptr && !f->spec.flag.empty() ? f->spec.flag : it.key();
      fail_usage(flag + " (model config key '" + it.key() + "'): not supported by --arch " + j.value("arch", arch) +
                     " (the roberta encoder: symmetric ALiBi with the paper's slopes; --alibi-learnable-slopes, "
                     "and eval-lm --task masked_lm --alibi-interpolate)",
                 "drop " + flag + ", or train a decoder (--arch transformer_lm*) where the ALiBi variants are flags");
    }
  fields::apply_model_config(
      fields(), *this, j, source,
      [](const std::string& key) { return "unknown model config key '" + key + "' for the roberta encoder"; },
      "known keys: encoder_layers, encoder_embed_dim, encoder_ffn_embed_dim, encoder_attention_heads, "
      "encoder_normalize_before, pos, max_positions, dropout, ... (`stretch train --help`)");
}

std::string structural_differences(const RobertaConfig& saved, const RobertaConfig& wanted) {
  return fields::structural_differences(RobertaConfig::fields(), saved, wanted);
}

RobertaConfig roberta_preset(const std::string& arch) {
  RobertaConfig c;
  c.arch = arch;
  if (arch == "roberta_base" || arch == "roberta") return c;
  if (arch == "roberta_small") {
    c.encoder_layers = 4, c.encoder_embed_dim = 256, c.encoder_ffn_embed_dim = 1024, c.encoder_attention_heads = 4;
    return c;
  }
  if (arch == "roberta_tiny") {
    c.encoder_layers = 2, c.encoder_embed_dim = 128, c.encoder_ffn_embed_dim = 512, c.encoder_attention_heads = 4;
    return c;
  }
  fail_usage("--arch: unknown architecture '" + arch + "'", "`stretch train --arch help` lists them");
}

}  // namespace stretch::models
