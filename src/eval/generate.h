// eval/generate.h — `stretch generate`: sampling with a KV cache. Every position method is
// applied in the cached path exactly as in a full forward (ALiBi's −m·(i−j) included, which
// the ALiBi fork skipped; tests/models/test_kv_cache.cpp checks logits step by step).
// The context starts with </s>, as every training stream does (REFERENCE.md §4.3).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/transformer_lm.h"

namespace stretch::eval {

struct SamplingParams {
  int64_t max_len = 50;       // new tokens
  float temperature = 1.0f;   // 0: greedy
  int64_t top_k = 0;          // 0: off
  float top_p = 1.0f;         // nucleus; 1: off
  int32_t stop_token = -1;    // stop after emitting this id (eos); -1: never
};

// Picks a token id from logits [V] (temperature, top-k, top-p); deterministic given rng state.
int32_t sample_from_logits(const float* logits, int64_t vocab, const SamplingParams& p, Rng& rng,
                           const std::vector<int32_t>& banned);
// Continues `context` (ids, starting with eos) by up to max_len tokens; returns the new ids.
std::vector<int32_t> generate_tokens(models::TransformerLM& model, const std::vector<int32_t>& context,
                                     const SamplingParams& p, Rng& rng);

struct GenerateConfig {
  std::string data;             // data-bin directory (its dict.txt)
  std::string path;             // checkpoint
  std::string prompt;
  SamplingParams sampling;
  uint64_t seed = 1;
  int64_t nbest = 1;            // samples to draw
  nlohmann::json overrides = nlohmann::json::object();
};

int run_generate(const GenerateConfig& config);

}  // namespace stretch::eval
