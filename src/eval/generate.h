// eval/generate.h — `stretch generate`: sampling with a KV cache. Every position method is
// applied in the cached path exactly as in a full forward (ALiBi's −m·(i−j) included, which
// the ALiBi fork skipped; tests/models/test_kv_cache.cpp checks logits step by step).
// The context starts with </s>, as every training stream does (REFERENCE.md §4.3), or with <s> for a
// model trained with --add-bos-token (fairseq conditions generation on <s> then).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/language_model.h"
#include "models/model_file.h"

namespace stretch::data {
class Dictionary;
}

namespace stretch::eval {

struct SamplingParams {
  int64_t max_len = 50;       // new tokens
  float temperature = 1.0f;   // 0: greedy
  int64_t top_k = 0;          // 0: off
  float top_p = 1.0f;         // nucleus; 1: off
  int32_t stop_token = -1;    // stop after emitting this id (eos); -1: never
};

// Usage errors (exit 2) for values that have no meaning: temperature NaN, ±inf or < 0; top_p
// outside (0, 1] (NaN included); top_k < 0; max_len < 0.
void check_sampling_params(const SamplingParams& p);

// Picks a token id from logits [V]; deterministic given the rng state. A NaN among the logits
// is an error (ErrorKind::Numeric), never a sample.
//   temperature <= 0: argmax (lowest id on ties), no draw.
//   else: ids sorted by logit (descending, stable), the first top_k kept (0: all), weights
//   exp((l − max) / temperature); top_p < 1 then keeps the shortest prefix whose weight reaches
//   top_p of the kept total (the token that crosses the threshold included, as fairseq's
//   sampling_topp); one uniform draw u in [0, 1) picks the first id whose cumulative weight
//   exceeds u · total. `banned` ids get weight 0 (and are never the argmax).
int32_t sample_from_logits(const float* logits, int64_t vocab, const SamplingParams& p, Rng& rng,
                           const std::vector<int32_t>& banned);
// Ids generation never emits: <s>, <pad>, <unk> and the madeupwordNNNN padding symbols.
std::vector<int32_t> banned_ids(const data::Dictionary& dict);
// Continues `context` (ids, starting with eos) by up to max_len tokens with a KV cache (the
// context in one pass, then one token per pass); returns the new ids. NaN scores at a step are
// an error naming the step. `log_probs`, when given, receives the model's natural-log probability
// of each new id (log-softmax over all V ids, before temperature, top-k, top-p and banning).
// Transformer-XL's state is its memory (HF's `mems`): the context after mem_len zero rows, then
// each token sees the last mem_len layer inputs (models/transformer_xl/transformer_xl.h).
std::vector<int32_t> generate_tokens(models::LanguageModel& model, const std::vector<int32_t>& context,
                                     const SamplingParams& p, Rng& rng, const std::vector<int32_t>& banned,
                                     std::vector<double>* log_probs = nullptr);

struct GenerateConfig {
  std::string data;             // data-bin directory (its dict.txt); empty: the model file's dictionary
  std::string path;             // checkpoint
  std::string prompt;
  SamplingParams sampling;
  uint64_t seed = 1;
  int64_t nbest = 1;            // samples to draw
  bool print_scores = false;    // --print-scores: each sample also lists its new ids and their log-probs
  nlohmann::json overrides = nlohmann::json::object();
};

// The dictionary generate uses: DATA/dict.txt when config.data is given (checked against the
// model file), else the one stored in the model file (a usage error when it has none).
data::Dictionary generation_dictionary(const GenerateConfig& config, const models::ModelFile& file, int64_t vocab);
// What `stretch generate` prints, one string per sample (config.nbest of them), drawn from one
// Rng(config.seed) in order: the prompt and its continuation. run_generate and the Python module
// (python/) call it; `on_sample`, when given, sees each sample as soon as it is drawn. With
// print_scores a sample is three lines: the text, "ids\t" and the new ids, "logprobs\t" and
// their natural-log probabilities (%.9g), space-separated.
std::vector<std::string> generate_samples(models::LanguageModel& model, const data::Dictionary& dict,
                                          const GenerateConfig& config,
                                          const std::function<void(const std::string&)>& on_sample = {});

int run_generate(const GenerateConfig& config);

}  // namespace stretch::eval
