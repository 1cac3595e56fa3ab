// eval/eval_lm.h — `stretch eval-lm`: fairseq-eval-lm's protocol (REFERENCE.md §4.4).
// Contract: the split is cut into blocks of L − c new tokens (L = --tokens-per-sample,
// c = --context-window, or c = L − S for --stride S); each window's input is the shifted
// stream with up to c earlier tokens before the block; only the block's own targets are
// scored, every </s> included; loss₂ = −Σ log p / count / ln 2, perplexity = 2^loss₂;
// scores of ±inf are dropped from the sum and the count (fairseq) and counted (dropped_inf);
// a NaN score is an error (ErrorKind::Numeric, exit 1) naming its stream offset and target.
// Batching: windows go through the model in order, as many per forward pass as
// --max-sentences / --max-tokens allow (fairseq's batch_by_size on block lengths), and never
// more than kForwardTokens input tokens per pass (at least one window), so --max-tokens with a
// large context cannot exhaust memory; the result does not depend on the batching. The output
// projection and log-softmax run only at scored rows, in chunks of kScoreChunkBytes of logits,
// so a sliding window costs about L/S times the non-overlapping run.
// The cached mode (--kv-cache) is Transformer-XL-style evaluation for relative position
// methods (alibi, t5, rope, none): segments of L tokens, keys/values of the previous
// M = (c > 0 ? c : L) tokens kept and reused (here c may exceed L; --stride is refused). It is faster and NOT the fairseq protocol; its
// output says so. With M ≥ the stream length it computes exactly the non-overlapping
// evaluation with one window holding the whole stream (tests/eval/test_eval_lm.cpp).
// --task truncated_bptt_lm (EvalProtocol::TruncatedBptt, fairseq's examples/truncated_bptt
// eval_lm_dataloader): B = --batch-size streams over the split in segments of T = --tokens-per-sample
// (data::BpttStreams, the order of --bptt-order), one forward pass per step in order, the model's
// memory (SegmentUse::Training: --mem-len, or none) carried from step to step; every non-pad target is
// scored (fairseq order: T − 1 per full block); "Evaluated N tokens" counts B·T per step as fairseq's
// does (EvalResult::fairseq_ntokens). --context-window is refused with fairseq's advice.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/shorten.h"
#include "data/token_blocks.h"
#include "eval/word_output.h"
#include "models/language_model.h"
#include "models/model_file.h"
#include "nn/output_head.h"
#include "train/lm_data.h"

namespace stretch::data {
class TokenStream;
}

namespace stretch::eval {

// MaskedLm: masked-token perplexity of an encoder (eval/masked_lm_eval.h).
enum class EvalProtocol : uint8_t { Windows, KvCache, TruncatedBptt, MaskedLm };

constexpr int64_t kForwardTokens = 4096;           // most input tokens per forward pass
constexpr int64_t kScoreChunkBytes = nn::kScoreChunkBytes;  // logits computed at once while scoring

struct EvalOptions {
  int64_t tokens_per_sample = 0;   // L (0: the model's tokens_per_sample)
  int64_t context_window = 0;      // c
  int64_t stride = 0;              // S (0: use context_window); c = L − S
  int64_t max_sentences = 0;       // windows per forward pass (0: no limit but kForwardTokens)
  int64_t max_tokens = 0;          // block tokens (without context) per forward pass (0: no limit)
  EvalProtocol protocol = EvalProtocol::Windows;
  bool bptt_across_blocks = false;  // TruncatedBptt: --bptt-order transformer_xl (targets cross segments)
  int32_t bos = 0, pad = 1, eos = 2;
  // fairseq's --add-bos-token (eval-lm's task flag): <s> before each block, its score dropped
  // (data/eval_windows.h). A model trained with it (ModelInfo::add_bos_token) gets it without the flag.
  // The windows protocol only: refused with --kv-cache and --task truncated_bptt_lm.
  bool add_bos_token = false;
  // --sample-break-mode (windows protocol): none, eos (a block per line) or complete (lines packed up to L).
  data::BreakMode break_mode = data::BreakMode::None;
  std::string word_probs_path = ""; // per-token NLL dump (TSV: offset, target id, nll nats): --dump-nll
  int64_t num_shards = 1;          // --num-shards: evaluate fairseq's batches shard_id, shard_id + S, ...
  int64_t shard_id = 0;            // --shard-id
  std::vector<TokenScore>* record = nullptr;  // every scored token (±inf included), in scoring order
  int64_t score_chunk_rows = 0;    // rows projected to logits at once (0: kScoreChunkBytes of logits)
  // Called once the protocol is known, before anything is scored (eval-lm prints its header).
  std::function<void(const struct EvalResult&)> on_start{};
  // Called after each forward pass with the targets scored so far (of the stream's total);
  // returning false stops there: evaluate() returns the partial result (EvalResult::partial).
  std::function<bool(int64_t scored, int64_t total)> on_progress{};
  // Called for every target in stream order (after the NaN check, before ±inf is dropped) with its
  // stream offset, id and NLL in nats: the Python module's per-token arrays (python/).
  std::function<void(int64_t offset, int32_t target, double nll)> on_score{};
};

struct EvalResult {
  double loss2 = 0;          // mean NLL in bits per token
  double ppl = 0;            // 2^loss2
  double nll_sum = 0;        // Σ −log p over scored tokens, nats
  int64_t count = 0;         // scored tokens
  int64_t dropped_inf = 0;   // tokens whose score was ±inf, left out of the sum and count (fairseq)
  double stderr2 = 0;        // standard error of the mean NLL, bits
  double seconds = 0;
  double tokens_per_second = 0;
  int64_t tokens_per_sample = 0;  // L used
  int64_t context_window = 0;     // c used (kv-cache: the memory M)
  int64_t forward_passes = 0;
  int64_t max_rows = 0;           // most windows in one forward pass
  EvalProtocol protocol = EvalProtocol::Windows;
  std::string protocol_text;      // description for the output
  int64_t total_tokens = 0;       // targets in the stream (count + dropped_inf when complete)
  int64_t fairseq_ntokens = 0;    // fairseq's "Evaluated N tokens": TruncatedBptt Σ B·T over the steps; windows:
                                  // the scored targets (+ one <s> per block with add_bos_token)
  bool add_bos_token = false;     // <s> was put before each block (the flag or the model's config)
  bool partial = false;           // stopped early by on_progress: the numbers cover `count` targets
  std::vector<int64_t> block_order;  // the blocks evaluated, in fairseq's print order (windows protocol)
  int64_t block_tokens = 0;          // tokens per block (L − c; kv-cache: L)
};

// Evaluates `model` on `stream`. Errors (e.g. learned positions past their table) are thrown.
EvalResult evaluate(models::LanguageModel& model, const data::TokenStream& stream, const EvalOptions& options);

// Machine-readable form (--results-json): count, dropped_inf, loss_base2, ppl, nll_sum_nats, stderr_base2,
// tokens_per_sample, context_window, stride, protocol, fairseq_protocol, seconds,
// tokens_per_second, forward_passes, windows_per_pass.
nlohmann::json eval_result_json(const EvalResult& r);

// Peak resident memory of this process so far (VmHWM), MB; NaN where /proc is unavailable.
double peak_rss_mb();

// Builds a model for evaluation from a model file or checkpoint with --model-overrides applied
// (OverrideUse::Evaluation: e.g. transformer_lm ignores max_target_positions for learned
// positions, whose table keeps its trained size).
std::unique_ptr<models::LanguageModel> load_eval_model(const std::string& path, const nlohmann::json& overrides,
                                                       models::ModelFile* contents);

struct EvalLmConfig {
  std::string data;
  std::string path;
  std::string gen_subset = "test";
  EvalOptions options;
  nlohmann::json overrides = nlohmann::json::object();
  std::string results_json;        // --results-json FILE: eval_result_json + run fields
  bool alibi_interpolate = false;  // --alibi-interpolate: slopes · L_train / L_eval (arXiv:2310.13017)
  bool output_word_probs = false;  // fairseq's --output-word-probs: one line of words and ln p per sample
  bool output_word_stats = false;  // fairseq's --output-word-stats
  std::string post_process;        // fairseq's --post-process / --remove-bpe (word-level counts)
  bool no_progress = false;        // --log-format none: no progress display
  // fairseq's --shorten-method / --shorten-data-split-list (data/shorten.h): lines longer than the
  // evaluation's --tokens-per-sample cut before the blocks (windows protocol, language_modeling);
  // --seed is random_crop's seed.
  data::ShortenMethod shorten_method = data::ShortenMethod::None;
  std::string shorten_data_split_list{};
  int64_t seed = 1;
};

// Position interpolation for ALiBi (arXiv:2310.13017): the slope factor min(1, L_train / L_eval),
// so an evaluation longer than training sees the bias range it was trained on.
double alibi_interpolation_scale(int64_t train_length, int64_t eval_length);
// `overrides` plus alibi_slope_scale = alibi_interpolation_scale(...) for the model file at
// `path` (its config: `model_config`). Usage errors: the model does not use ALiBi, or
// --model-overrides already sets alibi_slope_scale.
nlohmann::json alibi_interpolation_overrides(const std::string& path, const nlohmann::json& model_config,
                                             const nlohmann::json& overrides, int64_t eval_length);

// What `stretch eval-lm` evaluates, prepared as it prepares it: the model with --model-overrides
// (and --alibi-interpolate: `slope_scale`), the file it came from, the data's dictionary (checked
// against the model's) and the split's stream. run_eval_lm and the Python module (python/) call it.
struct EvalLmSetup {
  std::unique_ptr<models::LanguageModel> model{};
  models::ModelFile file{};
  train::LmData data{};
  std::shared_ptr<const data::TokenStream> stream{};
  double slope_scale = 1.0;      // --alibi-interpolate's factor (1: off)
  int64_t train_length = 0;      // the model's training length
  EvalOptions options{};         // cfg.options with the data's pad and eos
};
EvalLmSetup prepare_eval_lm(const EvalLmConfig& config);
// evaluate() of a prepared setup; a Numeric error names the checkpoint and the split.
EvalResult evaluate_split(EvalLmSetup& setup, const EvalLmConfig& config, const EvalOptions& options);

int run_eval_lm(const EvalLmConfig& config);

}  // namespace stretch::eval
