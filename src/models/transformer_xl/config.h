// models/transformer_xl/config.h — the typed configuration of the transformer_xl family
// (fairseq's examples/truncated_bptt TransformerXLConfig, which builds HuggingFace's TransfoXL;
// REFERENCE.md §6.6). Contract: keys and flags are fairseq's dataclass fields (--n-layer,
// --d-model, --n-head, --d-head, --d-inner, --div-val, --mem-len, --clamp-len, --same-length,
// --dropout, --dropatt, --cutoffs) plus HF's untie_r and stretch's xl_original; ONE table
// (fields(), config.cpp) gives JSON, --model-overrides, the flags and the resume check.
// Defaults are fairseq's (d_model 500, 10 heads of 50, d_inner 1000, 12 layers, mem_len 0,
// clamp_len −1, dropout 0). Semantics: HF's (zero memories before the first segment, one
// (r_w_bias, r_r_bias) pair per layer); xl_original: the original code's (empty first memory,
// one pair shared by the whole model). Cutoffs ≥ V are dropped as fairseq does; the remaining
// ones give HF's AdaptiveEmbedding and ProjectedAdaptiveLogSoftmax (div_val: band i's dimension
// d_model // div_val^i), none the full softmax.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/config_fields.h"

namespace stretch::models {

struct TransformerXLConfig {
  std::string arch = "transformer_xl";
  int64_t vocab_size = 0;       // V (dictionary size, padded to a multiple of 8)
  int32_t padding_idx = 1;
  int64_t n_layer = 12;         // L
  int64_t d_model = 500;        // C (= d_embed, as fairseq sets it)
  int64_t n_head = 10;          // H
  int64_t d_head = 50;          // D (H·D need not equal C)
  int64_t d_inner = 1000;       // FFN inner dim
  int64_t div_val = 1;          // band i's embedding dimension d_model // div_val^i (1: one table)
  std::string cutoffs = "20000,40000,200000";  // fairseq's default; those >= V are dropped
  int64_t mem_len = 0;          // M: rows of memory per layer (0: none)
  int64_t clamp_len = -1;       // > 0: distances beyond it use the embedding of clamp_len
  bool same_length = false;     // every query sees exactly mem_len keys (window = mem_len)
  float dropout = 0.0f;         // embeddings, R, attention output, FFN inner and output, final
  float dropatt = 0.0f;         // attention probabilities
  bool untie_r = true;          // HF's default: r_w_bias / r_r_bias per layer
  bool xl_original = false;     // the original: empty first memory and one shared (u, v) pair
  std::string criterion = "cross_entropy";
  int64_t tokens_per_sample = 512;
  int64_t max_target_positions = 512;

  int64_t inner_dim() const { return n_head * d_head; }  // H·D
  bool shared_r() const { return xl_original || !untie_r; }
  bool zero_memory_start() const { return !xl_original; }
  // The cutoffs fairseq keeps (those < V): the adaptive softmax's bands (none: the full softmax).
  std::vector<int64_t> kept_cutoffs() const;
  void validate() const;  // usage errors naming flag, key and value (any vocabulary size)
  // With the dictionary's V: every band of the adaptive embedding keeps a dimension >= 1.
  void check_vocabulary() const;
  nlohmann::json to_json() const;
  static TransformerXLConfig from_json(const nlohmann::json& j);
  void apply_overrides(const nlohmann::json& overrides, const std::string& source = "--model-overrides");
  static bool is_key(const std::string& key);
  static const std::vector<Field<TransformerXLConfig>>& fields();
};

std::string structural_differences(const TransformerXLConfig& saved, const TransformerXLConfig& wanted);

// Presets: transformer_xl (fairseq's defaults), transformer_xl_enwik8
// (12 × 512, 8 × 64, 2048, dropout 0.1, mem 512), transformer_xl_tiny (2 × 64, 4 × 16, 128: tests).
TransformerXLConfig transformer_xl_preset(const std::string& arch);

}  // namespace stretch::models
