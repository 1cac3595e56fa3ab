// models/adaptive_span/config.h — the adaptive_span family's config: fairseq's
// AdaptiveSpanSmallConfig (examples/adaptive_span/adaptive_span_model_wrapper.py) field for field,
// with its key names and flags (--n-layer ... --aux-loss-scaler), plus two stretch switches for the
// original's behaviour (REFERENCE.md §5.6: the port is the default):
//   adapt_span_renormalise  the original renormalises the masked probabilities (here: log m added
//                           before the softmax, the same distribution); the port does not
//   adapt_span_clamp        forward (the port: z clamped into [0, 1] inside every forward, after the
//                           layer's trim sizes were taken from the raw z) | after_step (the original:
//                           clamp_param() after every optimizer step)
// and the criterion, `adaptive_span_loss` (the only one this family has: the head owns the loss).
// Contract: from_json/to_json round-trip; validate() raises usage errors naming flag, key and value.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/config_fields.h"

namespace stretch::models {

enum class SpanClamp : uint8_t { Forward, AfterStep };
const char* span_clamp_name(SpanClamp c);
SpanClamp parse_span_clamp(const std::string& s);
enum class SpanCriterion : uint8_t { AdaptiveSpanLoss };
const char* span_criterion_name(SpanCriterion c);
SpanCriterion parse_span_criterion(const std::string& s);

struct AdaptiveSpanConfig {
  std::string arch = "adaptive_span";
  int64_t vocab_size = 0;          // V (dict.txt)
  int32_t padding_idx = 1;
  int64_t tokens_per_sample = 512; // M: the block length of training
  int64_t d_model = 256;           // C
  int64_t n_head = 4;              // H
  int64_t d_inner = 1024;          // F
  int64_t n_layer = 8;             // layers
  int64_t attn_span = 1024;        // L: the maximum span
  float dropout = 0.0f;            // attention probabilities and the FFN's hidden layer
  float emb_dropout = 0.0f;        // after the input embedding and before the output layer
  int64_t adapt_span_ramp = 32;    // R
  float adapt_span_init = 0.0f;    // z at initialisation
  float aux_loss_scaler = 2e-6f;   // aux = scaler · Σ_layers L · mean(z)
  bool adapt_span_layer = false;   // one z per layer instead of one per head
  bool adapt_span_renormalise = false;
  SpanClamp adapt_span_clamp = SpanClamp::Forward;
  SpanCriterion criterion = SpanCriterion::AdaptiveSpanLoss;

  int64_t head_dim() const { return d_model / n_head; }
  int64_t span_params() const { return adapt_span_layer ? 1 : n_head; }

  static const std::vector<Field<AdaptiveSpanConfig>>& fields();
  static bool is_key(const std::string& key);
  static AdaptiveSpanConfig from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
  // Unknown keys are usage errors naming the key; `source` names where the values came from.
  void apply_overrides(const nlohmann::json& j, const std::string& source);
  void validate() const;
};

}  // namespace stretch::models
