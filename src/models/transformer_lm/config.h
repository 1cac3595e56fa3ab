// models/transformer_lm/config.h — the typed configuration of the transformer_lm family.
// Contract: field names follow fairseq's argument names; ONE table (fields(), config.cpp)
// declares each field once — key, flag, help, kind, role — and to_json(), from_json(),
// apply_overrides(), the command-line flags (cli/model_flags.cpp via models/registry.h) and the
// resume compatibility check (structural_differences) all come from it. Unknown keys are an
// error, except fairseq's buffer-sizing keys (max_tokens, ...) which are accepted and ignored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/config_fields.h"
#include "ops/activation.h"
#include "ops/attention.h"

namespace stretch::models {

// The training criterion (fairseq's --criterion): cross_entropy, or adaptive_loss (needs an
// adaptive softmax). With an adaptive softmax, cross_entropy is fairseq's cross_entropy over
// get_normalized_probs: the exact NLL (nn/adaptive_softmax.h).
enum class Criterion : uint8_t { CrossEntropy, AdaptiveLoss };
const char* criterion_name(Criterion c);
Criterion parse_criterion(const std::string& s);

enum class PosMethod : uint8_t { Alibi, Sinusoidal, Learned, Rope, T5, None };
const char* pos_method_name(PosMethod p);
PosMethod parse_pos_method(const std::string& s);  // throws a usage error naming the value
// --pos-upper: the position method of the layers from --pos-upper-from-layer up (hybrid stacks).
enum class UpperPos : uint8_t { Same, Rope, T5, None };
const char* upper_pos_name(UpperPos p);
UpperPos parse_upper_pos(const std::string& s);
const char* alibi_shape_name(ops::AlibiShape s);
ops::AlibiShape parse_alibi_shape(const std::string& s);

struct TransformerLMConfig {
  std::string arch = "transformer_lm";
  int64_t vocab_size = 0;                  // V (dictionary size, padded to a multiple of 8)
  int64_t decoder_layers = 6;              // L
  int64_t decoder_embed_dim = 512;         // C
  int64_t decoder_ffn_embed_dim = 2048;    // F
  int64_t decoder_attention_heads = 8;     // H
  // fairseq's decoder_input_dim / decoder_output_dim (0: = C). Input ≠ C: the token embedding is
  // [V, input] followed by decoder.project_in_dim [C, input] (with adaptive input: the bands' d_0
  // instead, no projection); output ≠ C: decoder.project_out_dim [output, C] after the final norm
  // and the output head reads [.., output] (fairseq skips project_out_dim with tied adaptive weights).
  int64_t decoder_input_dim = 0;
  int64_t decoder_output_dim = 0;
  bool decoder_normalize_before = true;    // pre-norm (fairseq's base_lm forces it)
  bool no_decoder_final_norm = false;      // final LayerNorm after the last pre-norm block
  bool share_decoder_input_output_embed = false;
  bool no_scale_embedding = false;         // embed_scale = sqrt(C) unless set
  bool layernorm_embedding = false;        // decoder.layernorm_embedding: LayerNorm after scale + positions, before dropout
  // NormFormer (fairseq's --scale-*; nn/decoder_block.h): c_attn [H] on the attention output, attn_ln [C]
  // after it, ffn_layernorm [F] before fc2, w_resid [C] on the FFN's residual.
  bool scale_heads = false, scale_attn = false, scale_fc = false, scale_resids = false;
  ops::Activation activation_fn = ops::Activation::Relu;
  PosMethod pos = PosMethod::Alibi;
  int64_t tokens_per_sample = 512;         // training block length L_train
  int64_t max_target_positions = 512;      // learned-position table size (+2 rows)
  float dropout = 0.1f;
  float attention_dropout = 0.0f;
  float activation_dropout = 0.0f;
  float decoder_layerdrop = 0.0f;  // fairseq's LayerDrop: in training each block is skipped with this probability
  int32_t padding_idx = 1;
  int64_t t5_num_buckets = 32;
  int64_t t5_max_distance = 128;
  float rope_base = 10000.0f;
  // Adaptive input / adaptive softmax (fairseq's names; cutoffs as fairseq's comma-separated strings).
  bool adaptive_input = false;
  float adaptive_input_factor = 4.0f;
  std::string adaptive_input_cutoff;       // "" : none
  std::string adaptive_softmax_cutoff;     // "" : full softmax
  float adaptive_softmax_dropout = 0.0f;
  float adaptive_softmax_factor = 4.0f;
  bool tie_adaptive_weights = false;       // output tables = the adaptive input's tables
  bool tie_adaptive_proj = false;          // tail projections = the input's, transposed
  Criterion criterion = Criterion::CrossEntropy;
  // ALiBi variants (issue 15; the contract is in models/transformer_lm/alibi_variants.h).
  std::string alibi_slopes = "";           // --alibi-slopes: H comma-separated slopes ("": the rule)
  std::string alibi_slope_groups = "";     // --alibi-slope-groups n:scale,...: a geometric series per group
  std::string alibi_layer_scale = "";      // --alibi-layer-scale: L factors, or linear:F
  std::string alibi_no_bias_heads = "";    // --alibi-no-bias-heads layer:head,...: slope 0
  bool alibi_learnable_slopes = false;     // slopes are parameters decoder.layers.N.self_attn.alibi_slopes [H]
  bool alibi_positive_slopes = false;      // learnable slopes clamped to >= 0 after every update
  ops::AlibiShape alibi_shape = ops::AlibiShape::Linear;  // linear m·d | log m·ln(1+d) | clipped m·min(d, D)
  int64_t alibi_clip_distance = 0;         // D of the clipped shape
  int64_t alibi_slope_warmup_updates = 0;  // N: slopes grow over N updates (0: off)
  float alibi_slope_warmup_init = 0.1f;    // F: the fraction of the slopes at update 0
  UpperPos pos_upper = UpperPos::Same;     // hybrid: layers >= pos_upper_from_layer use this method
  int64_t pos_upper_from_layer = 0;        // K (1 <= K < L when pos_upper is set)
  // Evaluation-time ALiBi options (not part of the trained weights).
  float alibi_slope_scale = 1.0f;          // position interpolation: slopes · L_train / L_eval
  int64_t attention_window = 0;            // keys visible iff i − j < W (0: unlimited)
  // XL-style memory (--mem-len M, with --task truncated_bptt_lm): each layer also attends to its
  // inputs of the last M earlier tokens, detached (transformer_lm.h HiddenMemory). 0: none.
  // Relative methods only (alibi, t5, none); a free field, so eval-lm may override it.
  int64_t mem_len = 0;
  // fairseq's --add-bos-token (a language_modeling task flag; models/fairseq import/export write it
  // as add_bos_token): <s> is prepended to every training row's input and target (that target is
  // scored), and eval-lm prepends it to each window's block and drops its score. Free: a fine-tune
  // may change it, and --model-overrides may at evaluation.
  bool add_bos_token = false;

  bool rope_anywhere() const { return pos == PosMethod::Rope || pos_upper == UpperPos::Rope; }
  bool t5_anywhere() const { return pos == PosMethod::T5 || pos_upper == UpperPos::T5; }
  int64_t head_dim() const { return decoder_embed_dim / decoder_attention_heads; }
  int64_t input_dim() const { return decoder_input_dim > 0 ? decoder_input_dim : decoder_embed_dim; }
  int64_t output_dim() const { return decoder_output_dim > 0 ? decoder_output_dim : decoder_embed_dim; }
  bool has_project_in() const { return !adaptive_input && input_dim() != decoder_embed_dim; }
  bool has_project_out() const { return output_dim() != decoder_embed_dim; }
  bool has_final_norm() const { return decoder_normalize_before && !no_decoder_final_norm; }
  bool has_adaptive_softmax() const { return !adaptive_softmax_cutoff.empty(); }
  // The parsed cutoffs (validate() has checked them).
  std::vector<int64_t> input_cutoffs() const;
  std::vector<int64_t> softmax_cutoffs() const;
  void validate() const;  // usage errors for impossible combinations
  nlohmann::json to_json() const;
  static TransformerLMConfig from_json(const nlohmann::json& j);
  // Apply --model-overrides (keys by fairseq name; unknown keys that fairseq would accept
  // but that mean nothing here, like max_tokens, are accepted and ignored). `source` names the
  // origin of the values in errors.
  void apply_overrides(const nlohmann::json& overrides, const std::string& source = "--model-overrides");
  // True for the keys to_json() writes.
  static bool is_key(const std::string& key);
  // The field table (one declaration per field).
  static const std::vector<Field<TransformerLMConfig>>& fields();
};

// "key saved (this run: wanted), ..." for the structural keys that differ ("" if none).
std::string structural_differences(const TransformerLMConfig& saved, const TransformerLMConfig& wanted);

// Presets by --arch name: transformer_lm, transformer_lm_wiki103 (= transformer_lm_baevski_wiki103:
// REFERENCE.md §2.1, adaptive input and a tied adaptive softmax), transformer_lm_small
// (4 layers, 256, 4 heads, 1024), transformer_lm_tiny (2 layers, 128, 4 heads, 512).
TransformerLMConfig preset(const std::string& arch);

}  // namespace stretch::models
