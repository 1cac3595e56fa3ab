// models/roberta/config.h — the typed configuration of the roberta family: a bidirectional
// Transformer encoder with fairseq's RoBERTa names (fairseq 0.12.2 models/roberta/model.py) and a
// masked-LM head, trained with --task masked_lm (train/masked_lm_data.h).
// Contract: ONE field table (fields()) declares every key once, as models/config_fields.h
// describes; keys that two families share (pos, dropout, activation_fn, criterion, ...) keep the
// flag of the other family, so the command line stays one set of flags. Positions: alibi is
// symmetric ALiBi −m_h·|i − j| (the paper's slopes for H heads, ops::alibi_slopes) with every key
// visible; sinusoidal / learned (fairseq's padding-offset positions, table max_positions + pad + 1
// rows) / none are the baselines; alibi_slope_scale (evaluation only) is what eval-lm --task
// masked_lm --alibi-interpolate sets. Unknown keys are usage errors naming the key; the ALiBi
// variant keys of the transformer_lm family (alibi_shape, alibi_slopes, pos_upper, ...) are
// refused naming their flag and the arch.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/config_fields.h"
#include "ops/activation.h"

namespace stretch::models {

enum class EncoderPos : uint8_t { Alibi, Sinusoidal, Learned, None };
const char* encoder_pos_name(EncoderPos p);
EncoderPos parse_encoder_pos(const std::string& s);  // a usage error naming --pos otherwise
// --criterion: masked_lm (the loss over the masked positions, sample size = their number).
enum class EncoderCriterion : uint8_t { MaskedLm };
const char* encoder_criterion_name(EncoderCriterion c);
EncoderCriterion parse_encoder_criterion(const std::string& s);

struct RobertaConfig {
  std::string arch = "roberta_base";
  int64_t vocab_size = 0;                 // V: dict.txt + <mask> (train/masked_lm_data.h)
  int32_t padding_idx = 1;
  int64_t encoder_layers = 12;            // L
  int64_t encoder_embed_dim = 768;        // C
  int64_t encoder_ffn_embed_dim = 3072;   // F
  int64_t encoder_attention_heads = 12;   // H
  bool encoder_normalize_before = false;  // RoBERTa: post-norm blocks, no final LayerNorm
  ops::Activation activation_fn = ops::Activation::Gelu;
  EncoderPos pos = EncoderPos::Alibi;
  int64_t tokens_per_sample = 512;        // training block length L_train
  int64_t max_positions = 512;            // learned-position table: max_positions + padding_idx + 1 rows
  float dropout = 0.1f;
  float attention_dropout = 0.1f;
  float activation_dropout = 0.0f;
  bool alibi_learnable_slopes = false;    // slopes are encoder.sentence_encoder.layers.N.self_attn.alibi_slopes [H]
  float alibi_slope_scale = 1.0f;         // position interpolation at evaluation: slopes · L_train / L_eval
  EncoderCriterion criterion = EncoderCriterion::MaskedLm;  // fairseq's masked_lm criterion (the only one)

  int64_t head_dim() const { return encoder_embed_dim / encoder_attention_heads; }
  void validate() const;  // usage errors naming flag and key
  nlohmann::json to_json() const;
  static RobertaConfig from_json(const nlohmann::json& j);
  void apply_overrides(const nlohmann::json& overrides, const std::string& source);
  static bool is_key(const std::string& key);
  static const std::vector<Field<RobertaConfig>>& fields();
};

std::string structural_differences(const RobertaConfig& saved, const RobertaConfig& wanted);

// roberta_base (fairseq's base_architecture: 12 layers, C 768, 12 heads, F 3072), roberta_small
// (4, 256, 4, 1024) and roberta_tiny (2, 128, 4, 512) for CPU work and tests.
RobertaConfig roberta_preset(const std::string& arch);

}  // namespace stretch::models
