// eval/eval_lm.h — `stretch eval-lm`: fairseq-eval-lm's protocol (REFERENCE.md §4.4).
// Contract: the split is cut into blocks of L − c new tokens (L = --tokens-per-sample,
// c = --context-window, or c = L − S for --stride S); each window's input is the shifted
// stream with up to c earlier tokens before the block; only the block's own targets are
// scored, every </s> included; loss₂ = −Σ log p / count / ln 2, perplexity = 2^loss₂.
// Many windows go through one forward pass (--max-sentences / --max-tokens), and the output
// projection and softmax run only at scored positions, so a sliding window costs about L/S
// times the non-overlapping run with no per-window overhead.
// The cached mode (--kv-cache) is Transformer-XL-style evaluation for relative position
// methods (alibi, t5, rope, none): segments of L tokens, keys/values of the previous
// --context-window tokens kept and reused. It is faster and NOT the fairseq protocol; its
// output says so.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/transformer_lm.h"

namespace stretch::data {
class TokenStream;
}

namespace stretch::eval {

enum class EvalProtocol : uint8_t { Windows, KvCache };

struct EvalOptions {
  int64_t tokens_per_sample = 0;   // L (0: the model's tokens_per_sample)
  int64_t context_window = 0;      // c
  int64_t stride = 0;              // S (0: use context_window); c = L − S
  int64_t max_sentences = 0;       // windows per forward pass (0: from max_tokens, else 1)
  int64_t max_tokens = 0;
  EvalProtocol protocol = EvalProtocol::Windows;
  int32_t pad = 1, eos = 2;
  std::string word_probs_path;     // per-token NLL dump (TSV: offset, target id, nll nats)
};

struct EvalResult {
  double loss2 = 0;          // mean NLL in bits per token
  double ppl = 0;            // 2^loss2
  int64_t count = 0;         // scored tokens
  double stderr2 = 0;        // standard error of the mean NLL, bits
  double seconds = 0;
  double tokens_per_second = 0;
  std::string protocol;      // description for the output
};

// Evaluates `model` on `stream`. Errors (e.g. learned positions past their table) are thrown.
EvalResult evaluate(models::TransformerLM& model, const data::TokenStream& stream, const EvalOptions& options);

struct EvalLmConfig {
  std::string data;
  std::string path;
  std::string gen_subset = "test";
  EvalOptions options;
  nlohmann::json overrides = nlohmann::json::object();
  bool skip_invalid_size = false;
};

int run_eval_lm(const EvalLmConfig& config);

}  // namespace stretch::eval
