// eval/eval_lm.cpp — see eval_lm.h.
#include "eval/eval_lm.h"
#include "eval/masked_lm_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/log.h"
#include "core/output_file.h"
#include "core/progress_display.h"
#include "core/signals.h"
#include "data/bptt_stream.h"
#include "data/dictionary.h"
#include "data/eval_windows.h"
#include "eval/require_decoder.h"
#include "tensor/pool.h"
#include "train/lm_data.h"

namespace stretch::eval {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Accumulates per-token NLL (nats) in double; mean and standard error at the end.
struct NllStats {
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  int64_t dropped_inf = 0;  // ±inf scores, dropped as fairseq drops them
  std::ostream* dump = nullptr;
  std::vector<TokenScore>* record = nullptr;
  const std::function<void(int64_t, int32_t, double)>* on_score = nullptr;
  void add(double nll, int64_t offset, int32_t target) {
    // fairseq (sequence_scorer / eval_lm) drops ±inf scores from the sum and the count, but a
    // NaN would pass its `inf` test and poison the mean: here it is an error, never dropped.
    if (std::isnan(nll))
      throw Error(ErrorKind::Numeric,
                  "the score of the target at stream offset " + std::to_string(offset) + " (token id " +
                      std::to_string(target) + ") is NaN",
                  "the model computes NaN there: its weights (or --model-overrides) hold a NaN or overflow; check "
                  "the checkpoint (`stretch info`), resume from an earlier one, or retrain with a lower --lr / "
                  "--clip-norm");
    if (record) record->push_back({.offset = offset, .target = target, .log_prob = -static_cast<float>(nll)});
    if (on_score && *on_score) (*on_score)(offset, target, nll);
    if (std::isinf(nll)) {
      ++dropped_inf;
      return;
    }
    sum += nll;
    sum_sq += nll * nll;
    ++count;
    if (dump) *dump << offset << '\t' << target << '\t' << nll << '\n';
  }
};

// The rows of one forward pass that are scored: row index into hidden [N, C], target, and
// the target's offset in the stream.
struct ScoredRows {
  std::vector<int64_t> row;
  std::vector<int32_t> target;
  std::vector<int64_t> offset;
  void clear() { row.clear(), target.clear(), offset.clear(); }
};

// The head's NLL at the scored rows of hidden [N, C] only (chunked inside the head).
void score_rows(const models::LanguageModel& model, const Tensor& hidden, const ScoredRows& rows, int64_t chunk_rows,
                NllStats& stats) {
  std::vector<float> nll(rows.row.size());
  model.head().target_nll(hidden, rows.row, rows.target, nll.data(), chunk_rows);
  for (size_t i = 0; i < nll.size(); ++i) stats.add(nll[i], rows.offset[i], rows.target[i]);
}

data::EvalWindows make_windows(const data::TokenStream& stream, const EvalOptions& o, int64_t L, int64_t c,
                               bool add_bos, int64_t max_positions = 0) {
  data::EvalWindowParams wp;
  wp.max_positions = max_positions;
  wp.tokens_per_sample = L;
  wp.context_window = c;
  wp.pad = o.pad;
  wp.eos = o.eos;
  wp.add_bos_token = add_bos;
  wp.bos = o.bos;
  wp.break_mode = o.break_mode;
  const int64_t budget_rows = std::max<int64_t>(1, kForwardTokens / L);
  int64_t rows = o.max_sentences > 0 ? std::min(o.max_sentences, budget_rows) : budget_rows;
  wp.size = {.max_tokens = o.max_tokens, .max_sentences = rows, .required_batch_size_multiple = 1};
  // Shared ownership is only needed by EvalWindows; the caller keeps `stream` alive.
  wp.num_shards = o.num_shards;
  wp.shard_id = o.shard_id;
  // fairseq-eval-lm's batches (what the shards split): --max-tokens or 36000, --batch-size.
  wp.shard_size = {.max_tokens = o.max_tokens > 0 ? o.max_tokens : 36000, .max_sentences = o.max_sentences,
                   .required_batch_size_multiple = 1};
  std::shared_ptr<const data::TokenStream> s(&stream, [](const data::TokenStream*) {});
  return data::EvalWindows(s, wp);
}

void evaluate_windows(models::LanguageModel& model, data::EvalWindows& windows, const EvalOptions& o, NllStats& stats,
                      EvalResult& r) {
  const int64_t chunk_rows = o.score_chunk_rows;
  data::Batch batch;
  ScoredRows scored;
  std::pair<int64_t, int64_t> last_shape{0, 0};  // (rows, width) of the previous pass
  while (windows.next(batch)) {
    const int64_t B = batch.rows(), W = batch.width();
    // Rows are right-padded to (longest block) + c even while the context is still filling
    // (the first c windows); causal attention lets trailing pad columns be cut off.
    int64_t used = 0;
    for (int64_t b = 0; b < B; ++b) used = std::max<int64_t>(used, batch.lengths[b]);
    Tensor src = batch.src;  // [B, Wf] I32
    if (used < W) {
      src = Tensor::empty({B, used}, DType::I32);
      for (int64_t b = 0; b < B; ++b) std::copy_n(batch.src.i32() + b * W, used, src.i32() + b * used);
    }
    const int64_t Wf = src.dim(1);
    // The tensor pool keeps freed buffers per exact size class; while the context fills, each
    // pass has a new width, and cached buffers of every old shape would add up (1.4 GB instead
    // of 0.3 GB at L 512, stride 1). Hand them back when the shape changes.
    if (B != last_shape.first || Wf != last_shape.second) pool_release_cached();
    last_shape = {B, Wf};
    // Only positions from the earliest start on are scored: the last block computes just those
    // (keys/values of all), which spares most of a layer when the stride is small.
    int64_t first = Wf;
    for (int64_t b = 0; b < B; ++b) first = std::min<int64_t>(first, batch.starts[b]);
    const int64_t n = Wf - first;
    Tensor hidden = model.features(src, {.last_block_queries = n}).value();  // [B, n, C]
    scored.clear();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = batch.starts[b]; t < Wf; ++t) {
        const int32_t y = batch.tgt.i32()[b * W + t];
        if (y == o.pad) continue;
        scored.row.push_back(b * n + t - first);
        scored.target.push_back(y);
        scored.offset.push_back(batch.offsets[b] + (t - batch.starts[b]));
      }
    STRETCH_CHECK(static_cast<int64_t>(scored.row.size()) == batch.ntokens,
                  "eval: scored rows " << scored.row.size() << " vs ntokens " << batch.ntokens);
    score_rows(model, hidden, scored, chunk_rows, stats);
    // fairseq's sample["ntokens"] (what "Evaluated N tokens" counts): with --add-bos-token each
    // source has one <s> more, although its score is dropped from the loss.
    r.fairseq_ntokens += batch.ntokens + (r.add_bos_token ? B : 0);
    ++r.forward_passes;
    r.max_rows = std::max(r.max_rows, B);
    if (o.on_progress && !o.on_progress(stats.count + stats.dropped_inf, r.total_tokens)) {
      r.partial = true;
      return;
    }
  }
}

void evaluate_kv_cache(models::LanguageModel& model, const data::TokenStream& stream, int64_t L, int64_t memory,
                       const EvalOptions& o, NllStats& stats, EvalResult& r) {
  const int32_t eos = o.eos;
  const int64_t chunk_rows = o.score_chunk_rows;
  // A family whose positions are absolute refuses (a usage error naming the method).
  std::unique_ptr<models::SegmentState> state = model.new_segment_state(models::SegmentUse::Memory);
  const int64_t N = stream.total_tokens();
  ScoredRows scored;
  int64_t last_keys = -1;  // cached keys after the previous segment
  for (int64_t start = 0; start < N; start += L) {
    const int64_t n = std::min(L, N - start);
    Tensor src = Tensor::empty({1, n}, DType::I32);
    std::vector<int32_t> targets = stream.tokens(start, n);
    src.i32()[0] = start == 0 ? eos : stream.tokens(start - 1, 1)[0];
    std::copy_n(targets.data(), n - 1, src.i32() + 1);
    Tensor hidden = model.features(src, {.state = state.get()}).value();  // [1, n, C]
    scored.clear();
    for (int64_t i = 0; i < n; ++i) {
      scored.row.push_back(i);
      scored.target.push_back(targets[i]);
      scored.offset.push_back(start + i);
    }
    score_rows(model, hidden, scored, chunk_rows, stats);
    ++r.forward_passes;
    state->keep_last(memory);  // the state of the last `memory` tokens
    // While the state grows, every segment has new shapes and the pool's cached buffers of old
    // sizes would never be reused: hand them back (in the steady state the shapes repeat).
    const int64_t keys = state->kept();
    if (keys != last_keys || n != L) pool_release_cached();
    last_keys = keys;
    if (o.on_progress && !o.on_progress(stats.count + stats.dropped_inf, r.total_tokens)) {
      r.partial = true;
      break;
    }
  }
  r.max_rows = 1;
}

// --task truncated_bptt_lm: B = --batch-size streams of segments of L (eval_lm.h).
data::BpttStreams bptt_streams(const data::TokenStream& stream, int64_t L, const EvalOptions& o) {
  std::shared_ptr<const data::TokenStream> s(&stream, [](const data::TokenStream*) {});
  return data::BpttStreams(
      s, {.batch_size = o.max_sentences > 0 ? o.max_sentences : 1,
          .tokens_per_sample = L,
          .targets = o.bptt_across_blocks ? data::BpttTargets::AcrossBlocks : data::BpttTargets::WithinBlock,
          .pad = o.pad,
          .source = "the evaluated split"});
}

// The targets the streams score (what the progress display counts to).
int64_t bptt_targets(const data::BpttStreams& streams) {
  data::Batch batch;
  int64_t n = 0;
  for (int64_t i = 0; i < streams.num_steps(); ++i) {
    streams.step(i, batch);
    n += batch.ntokens;
  }
  return n;
}

// The steps in order, the model's memory carried from each to the next.
void evaluate_bptt(models::LanguageModel& model, const data::BpttStreams& streams, const EvalOptions& o,
                   NllStats& stats, EvalResult& r) {
  data::Batch batch;
  std::unique_ptr<models::SegmentState> memory = model.new_segment_state(models::SegmentUse::Training);
  ScoredRows scored;
  for (int64_t i = 0; i < streams.num_steps(); ++i) {
    streams.step(i, batch);
    const int64_t B = batch.rows(), W = batch.width();
    Tensor hidden = model.features(batch.src, {.state = memory.get()}).value();  // [B, W, C]
    scored.clear();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < W; ++t) {
        const int32_t y = batch.tgt.i32()[b * W + t];
        if (y == o.pad) continue;
        scored.row.push_back(b * W + t);
        scored.target.push_back(y);
        scored.offset.push_back(batch.offsets[b] + t);
      }
    score_rows(model, hidden, scored, o.score_chunk_rows, stats);
    r.fairseq_ntokens += B * W;
    ++r.forward_passes;
    r.max_rows = std::max(r.max_rows, B);
    if (o.on_progress && !o.on_progress(stats.count + stats.dropped_inf, r.total_tokens)) {
      r.partial = true;
      return;
    }
  }
}

// STRETCH_TEST_EVAL_STALL_AFTER_PASS=N (tests only, docs/formats.md "Test hooks"): after forward
// pass N, eval-lm waits for a stop signal, so a test can interrupt it at a known point.
int64_t test_stall_after_pass() {
  const char* v = std::getenv("STRETCH_TEST_EVAL_STALL_AFTER_PASS");
  return v && *v ? std::strtoll(v, nullptr, 10) : -1;
}

}  // namespace

EvalResult evaluate(models::LanguageModel& model, const data::TokenStream& stream, const EvalOptions& o) {
  autograd::NoGradGuard no_grad;
  const int64_t L = o.tokens_per_sample > 0 ? o.tokens_per_sample : model.info().tokens_per_sample;
  if (L < 1) fail_usage("--tokens-per-sample " + std::to_string(L) + " must be positive");
  if (o.stride < 0) fail_usage("--stride " + std::to_string(o.stride) + " must be positive");
  if (o.context_window < 0) fail_usage("--context-window " + std::to_string(o.context_window) + " must be >= 0");
  int64_t c = o.context_window;
  const bool add_bos = o.add_bos_token || model.info().add_bos_token;
  if (add_bos && (o.protocol == EvalProtocol::TruncatedBptt || o.protocol == EvalProtocol::KvCache))
    fail_usage(std::string("--add-bos-token has no meaning with ") +
                   (o.protocol == EvalProtocol::KvCache ? "--kv-cache" : "--task truncated_bptt_lm") +
                   (o.add_bos_token ? "" : " (the model was trained with it: its config has add_bos_token true)"),
               "it is fairseq's language_modeling protocol: drop " +
                   std::string(o.protocol == EvalProtocol::KvCache ? "--kv-cache" : "--task truncated_bptt_lm") +
                   (o.add_bos_token ? std::string(" or --add-bos-token")
                                    : std::string(", or score without <s>: --model-overrides '{\"add_bos_token\": false}'")));
  if (o.protocol == EvalProtocol::TruncatedBptt) {
    // fairseq's TruncatedBPTTLMTask.eval_lm_dataloader raises NotImplementedError with this advice.
    if (o.context_window > 0 || o.stride > 0)
      fail_usage(std::string(o.context_window > 0 ? "--context-window" : "--stride") +
                     " is refused with --task truncated_bptt_lm: Transformer-XL-style models don't need a context "
                     "window",
                 "drop it and give the model memory instead: --model-overrides '{\"mem_len\":42}'");
    // fairseq's TruncatedBPTTLMTask.get_batch_iterator takes num_shards/shard_id in **kwargs and
    // drops them (its streams are split by the distributed world only), so fairseq-eval-lm scores
    // the whole split on every shard. The same here, said once: combining such shards would count
    // every token N times.
    if (o.num_shards > 1)
      log_warning("--num-shards " + std::to_string(o.num_shards) + " --shard-id " + std::to_string(o.shard_id) +
                  " has no effect with --task truncated_bptt_lm (as in fairseq 0.12.2, whose truncated_bptt "
                  "batch iterator drops them): this run scores the whole split; don't combine shards");
  } else if (o.protocol == EvalProtocol::KvCache) {
    if (o.stride > 0)
      fail_usage("--stride has no meaning with --kv-cache",
                 "--kv-cache scores segments of --tokens-per-sample tokens; --context-window sets the memory");
  } else {
    if (o.stride > 0) {
      if (o.context_window > 0 && o.context_window != L - o.stride)
        fail_usage("--stride " + std::to_string(o.stride) + " and --context-window " +
                       std::to_string(o.context_window) + " disagree (stride S means context L - S = " +
                       std::to_string(L - o.stride) + ")",
                   "give one of them");
      if (o.stride > L)
        fail_usage("--stride " + std::to_string(o.stride) + " is larger than --tokens-per-sample " + std::to_string(L),
                   "a window scores at most L new tokens");
      c = L - o.stride;
    }
    if (c >= L)
      fail_usage("--context-window " + std::to_string(c) + " must be in [0, tokens-per-sample) = [0, " +
                     std::to_string(L) + ")",
                 "each window scores L - c >= 1 new tokens");
  }
  // Written under a temporary name and renamed at the end: a full disk or an error leaves no
  // partial dump (core/output_file.h).
  std::optional<OutputFile> dump;
  NllStats stats;
  stats.on_score = &o.on_score;
  if (!o.word_probs_path.empty()) {
    dump.emplace(o.word_probs_path, "the per-token dump (--dump-nll / --output-word-probs-file)");
    dump->stream() << "offset\ttarget\tnll_nats\n";
    dump->stream().precision(9);
    stats.dump = &dump->stream();
  }
  stats.record = o.record;
  const double t0 = now_seconds();
  EvalResult r;
  r.tokens_per_sample = L;
  r.protocol = o.protocol;
  r.total_tokens = stream.total_tokens();
  if (o.protocol == EvalProtocol::TruncatedBptt) {
    r.context_window = 0;
    r.protocol_text = std::string("truncated_bptt_lm (") + (o.bptt_across_blocks ? "transformer_xl" : "fairseq") +
                      " order): " + std::to_string(o.max_sentences > 0 ? o.max_sentences : 1) +
                      " streams, segments of " + std::to_string(L) + ", the model's memory carried across segments";
    const data::BpttStreams streams = bptt_streams(stream, L, o);
    r.total_tokens = bptt_targets(streams);
    if (o.on_start) o.on_start(r);
    evaluate_bptt(model, streams, o, stats, r);
  } else if (o.protocol == EvalProtocol::KvCache) {
    const int64_t memory = c > 0 ? c : L;
    r.context_window = memory;
    r.protocol_text = "kv-cache (Transformer-XL style: segments of " + std::to_string(L) + ", memory " +
                      std::to_string(memory) + "; NOT the fairseq-eval-lm protocol)";
    if (o.num_shards > 1)
      fail_usage("--num-shards has no meaning with --kv-cache", "the cached evaluation reads the split as one stream");
    r.block_tokens = L;
    for (int64_t k = 0; k * L < r.total_tokens; ++k) r.block_order.push_back(k);
    if (o.on_start) o.on_start(r);
    evaluate_kv_cache(model, stream, L, memory, o, stats, r);
  } else {
    r.context_window = c;
    r.protocol_text = c == 0 ? "non-overlapping, L = " + std::to_string(L)
                             : "sliding window, L = " + std::to_string(L) + ", context " + std::to_string(c) +
                                   " (stride " + std::to_string(L - c) + ")";
    if (o.num_shards > 1)
      r.protocol_text += ", shard " + std::to_string(o.shard_id) + " of " + std::to_string(o.num_shards);
    if (add_bos) r.protocol_text += ", <s> before each block (add_bos_token)";
    r.add_bos_token = add_bos;
    // Lines as blocks (eos, complete) can be longer than the model takes: fairseq-eval-lm skips those
    // (max_positions = the model's max_target_positions, --model-overrides included) with a warning.
    const nlohmann::json cfg = model.config_json();
    const int64_t max_positions = o.break_mode != data::BreakMode::None && cfg.contains("max_target_positions")
                                      ? cfg["max_target_positions"].get<int64_t>()
                                      : 0;
    if (o.break_mode != data::BreakMode::None)
      r.protocol_text += std::string(", --sample-break-mode ") + data::break_mode_name(o.break_mode);
    data::EvalWindows windows = make_windows(stream, o, L, c, add_bos, max_positions);
    if (!windows.skipped().empty()) {
      std::string first;
      for (size_t i = 0; i < std::min<size_t>(10, windows.skipped().size()); ++i)
        first += (i ? ", " : "") + std::to_string(windows.skipped()[i]);
      log_warning(std::to_string(windows.skipped().size()) + " samples have invalid sizes and will be skipped, "
                  "max_positions=" + std::to_string(max_positions) + ", first few sample ids=[" + first +
                  "] (as fairseq-eval-lm: lines longer than the model's max_target_positions; raise it with "
                  "--model-overrides \"{'max_target_positions': N}\" to score them)");
    }
    r.total_tokens = windows.scored_tokens();
    r.block_tokens = L - c;
    r.block_order = windows.fairseq_order();
    if (o.on_start) o.on_start(r);
    evaluate_windows(model, windows, o, stats, r);
  }
  r.seconds = now_seconds() - t0;
  r.count = stats.count;
  r.dropped_inf = stats.dropped_inf;
  if (stats.count == 0 && !r.partial) fail_input("eval-lm", "no token was scored", "is the split empty?");
  if (stats.count > 0) {  // (an interrupted run may have scored nothing yet: all zeros then)
    const double mean = stats.sum / stats.count;
    const double var = std::max(0.0, stats.sum_sq / stats.count - mean * mean);
    r.nll_sum = stats.sum;
    r.loss2 = mean / kLn2;
    r.ppl = std::pow(2.0, r.loss2);
    r.stderr2 = stats.count > 1 ? std::sqrt(var / (stats.count - 1)) / kLn2 : 0.0;
  }
  r.tokens_per_second = static_cast<double>(stats.count) / std::max(r.seconds, 1e-9);
  // A partial (interrupted) dump is never renamed into place: OutputFile removes its temporary.
  if (dump && !r.partial) dump->commit();
  return r;
}

nlohmann::json eval_result_json(const EvalResult& r) {
  const bool kv = r.protocol == EvalProtocol::KvCache;
  const bool bptt = r.protocol == EvalProtocol::TruncatedBptt;
  nlohmann::json j = {{"count", r.count},
          {"dropped_inf", r.dropped_inf},
          {"loss_base2", r.loss2},
          {"ppl", r.ppl},
          {"nll_sum_nats", r.nll_sum},
          {"stderr_base2", r.stderr2},
          {"tokens_per_sample", r.tokens_per_sample},
          {"context_window", r.context_window},
          {"stride", kv ? r.tokens_per_sample : r.tokens_per_sample - r.context_window},
          {"protocol", r.protocol_text},
          {"fairseq_protocol", !kv},
          {"seconds", r.seconds},
          {"tokens_per_second", r.tokens_per_second},
          {"forward_passes", r.forward_passes},
          {"windows_per_pass", r.max_rows}};
  if (r.add_bos_token) {
    j["add_bos_token"] = true;
    j["fairseq_ntokens"] = r.fairseq_ntokens;  // fairseq's "Evaluated N tokens": count + one <s> per block
  }
  if (bptt) {
    j["task"] = "truncated_bptt_lm";
    j["fairseq_ntokens"] = r.fairseq_ntokens;
  }
  return j;
}

double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // kB
  return NAN;
}

std::unique_ptr<models::LanguageModel> load_eval_model(const std::string& path, const nlohmann::json& overrides,
                                                       models::ModelFile* contents) {
  return models::load_model(path, overrides, models::OverrideUse::Evaluation, contents);
}

double alibi_interpolation_scale(int64_t train_length, int64_t eval_length) {
  if (train_length <= 0 || eval_length <= train_length) return 1.0;
  return static_cast<double>(train_length) / static_cast<double>(eval_length);
}

nlohmann::json alibi_interpolation_overrides(const std::string& path, const nlohmann::json& model_config,
                                             const nlohmann::json& overrides, int64_t eval_length) {
  const std::string pos = model_config.value("pos", std::string("?"));
  if (pos != "alibi")
    fail_usage("--alibi-interpolate: " + path + " uses --pos " + pos + "; interpolation scales ALiBi slopes",
               "drop --alibi-interpolate for this model");
  if (overrides.is_object() && overrides.contains("alibi_slope_scale"))
    fail_usage("--alibi-interpolate and --model-overrides alibi_slope_scale both set the slope scale",
               "give one of them");
  nlohmann::json o = overrides.is_object() ? overrides : nlohmann::json::object();
  o["alibi_slope_scale"] = alibi_interpolation_scale(model_config.value("tokens_per_sample", int64_t{0}), eval_length);
  return o;
}

void require_decoder(const models::ModelInfo& info, const std::string& path, const std::string& tool) {
  if (info.family == "roberta")
    fail_usage(tool + ": " + path + " is a roberta encoder (--arch " + info.arch +
                   "): it predicts masked tokens, not the next one",
               "evaluate it with `stretch eval-lm ... --task masked_lm [--tokens-per-sample L]` (masked-token "
               "perplexity at any length L)");
}

EvalLmSetup prepare_eval_lm(const EvalLmConfig& cfg) {
  EvalLmSetup s;
  s.model = load_eval_model(cfg.path, cfg.overrides, &s.file);
  require_decoder(s.model->info(), cfg.path, "eval-lm");
  s.train_length = s.model->info().tokens_per_sample;
  if (cfg.alibi_interpolate) {
    const int64_t eval_length = cfg.options.tokens_per_sample > 0 ? cfg.options.tokens_per_sample : s.train_length;
    const nlohmann::json o =
        alibi_interpolation_overrides(cfg.path, s.model->config_json(), cfg.overrides, eval_length);
    s.slope_scale = o.at("alibi_slope_scale").get<double>();
    s.model = load_eval_model(cfg.path, o, &s.file);
  }
  const models::ModelInfo info = s.model->info();
  s.data = train::open_lm_data(cfg.data);
  if (s.data.vocab_size != info.vocab_size || !models::dictionary_matches(s.file, s.data.dict_hash))
    fail_input(s.data.dict_path, "is not the dictionary the checkpoint " + cfg.path + " was trained with (" +
                                     std::to_string(s.data.vocab_size) + " symbols, hash " + s.data.dict_hash +
                                     "; checkpoint: " + std::to_string(info.vocab_size) + " symbols, hash " +
                                     s.file.dict_hash + ")",
               "evaluate on a data-bin binarized with the training dictionary (preprocess --srcdict)");
  const data::ShortenParams shorten{
      .method = cfg.shorten_method,
      .split_list = cfg.shorten_data_split_list,
      .length = cfg.options.tokens_per_sample > 0 ? cfg.options.tokens_per_sample : s.train_length,
      .seed = cfg.seed};
  s.stream = train::open_split_stream(cfg.data, cfg.gen_subset, s.data, shorten);
  s.options = cfg.options;
  s.options.bos = s.data.bos;
  s.options.pad = s.data.pad;
  s.options.eos = s.data.eos;
  return s;
}

EvalResult evaluate_split(EvalLmSetup& s, const EvalLmConfig& cfg, const EvalOptions& o) {
  try {
    return evaluate(*s.model, *s.stream, o);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Numeric) throw;
    throw Error(e.kind(), cfg.path + " on split '" + cfg.gen_subset + "': " + e.what());
  }
}

int run_eval_lm(const EvalLmConfig& cfg) {
  if (cfg.options.protocol == EvalProtocol::MaskedLm) return run_masked_lm_eval(cfg);
  EvalLmSetup setup = prepare_eval_lm(cfg);
  auto& model = setup.model;
  models::ModelFile& ck = setup.file;
  const double slope_scale = setup.slope_scale;
  if (cfg.alibi_interpolate)
    std::printf("stretch | eval-lm | ALiBi position interpolation: slopes x %lld / %lld = %.6g\n",
                static_cast<long long>(setup.train_length),
                static_cast<long long>(cfg.options.tokens_per_sample > 0 ? cfg.options.tokens_per_sample
                                                                         : setup.train_length),
                slope_scale);
  const models::ModelInfo info = model->info();
  const train::LmData& data = setup.data;
  EvalOptions o = setup.options;
  // The header at once; then a bar (terminal) or a line per tenth on stderr; SIGINT/SIGTERM stop
  // after the forward pass in flight with the partial result (exit 128+sig; a second one: at once).
  arm_graceful_stop();
  std::unique_ptr<ProgressDisplay> display;
  o.on_start = [&](const EvalResult& r) {
    std::printf("stretch | eval-lm | %s | %s\n", cfg.gen_subset.c_str(), r.protocol_text.c_str());
    std::fflush(stdout);
    if (!cfg.no_progress) display = std::make_unique<ProgressDisplay>("eval-lm " + cfg.gen_subset, r.total_tokens, "tokens");
  };
  int64_t passes = 0;
  const int64_t stall_after = test_stall_after_pass();
  o.on_progress = [&](int64_t scored, int64_t /*total*/) {
    if (display) display->update(scored);
    if (++passes == stall_after) {
      std::fprintf(stderr, "stretch-test: eval stalled after pass %lld\n", static_cast<long long>(passes));
      while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return stop_signal() == 0;
  };
  // fairseq's word-level output and --post-process need every token's score (±inf included).
  const bool words = cfg.output_word_probs || cfg.output_word_stats || !cfg.post_process.empty();
  std::vector<TokenScore> scores;
  std::optional<data::Dictionary> dict;
  std::optional<WordOutput> word_output;
  if (words) {
    dict.emplace(data::Dictionary::load(data.dict_path));
    word_output.emplace(*dict, WordOutputOptions{.word_probs = cfg.output_word_probs,
                                                 .word_stats = cfg.output_word_stats,
                                                 .post_process = cfg.post_process});
    o.record = &scores;
  }
  EvalResult r = evaluate_split(setup, cfg, o);
  if (display) display->finish();
  if (r.partial) {
    // The partial result, then a non-zero exit; no file claims to hold the whole split.
    const int sig = stop_signal();
    log_warning("eval-lm: stopped by signal " + std::to_string(sig) + " after " + std::to_string(r.count) + " of " +
                std::to_string(r.total_tokens) + " tokens; the result below is partial" +
                (cfg.results_json.empty() ? "" : " (--results-json not written)") +
                (o.word_probs_path.empty() ? "" : " (--dump-nll not written)"));
    std::printf("Partial result (interrupted): %lld of %lld tokens\n", static_cast<long long>(r.count),
                static_cast<long long>(r.total_tokens));
    std::printf("Evaluated %lld tokens in %.1fs (%.2f tokens/s)\n", static_cast<long long>(r.count), r.seconds,
                r.tokens_per_second);
    if (r.count > 0) std::printf("Loss (base 2): %.4f, Perplexity: %.2f\n", r.loss2, r.ppl);
    std::fflush(stdout);
    return 128 + sig;
  }
  // fairseq counts sample["ntokens"] here: B·T per step for truncated_bptt_lm, the scored targets plus one
  // <s> per block with --add-bos-token, the scored targets otherwise.
  const int64_t tokens = r.protocol == EvalProtocol::TruncatedBptt || r.add_bos_token ? r.fairseq_ntokens : r.count;
  if (words) {
    // Samples (blocks) in fairseq's order; each block's tokens in stream order.
    const int64_t bt = std::max<int64_t>(1, r.block_tokens);
    std::vector<std::vector<TokenScore>> blocks(static_cast<size_t>(setup.stream->total_tokens() / bt + 1));
    for (const TokenScore& t : scores) blocks.at(static_cast<size_t>(t.offset / bt)).push_back(t);
    for (int64_t k : r.block_order) {
      auto& b = blocks.at(static_cast<size_t>(k));
      std::sort(b.begin(), b.end(), [](const TokenScore& x, const TokenScore& y) { return x.offset < y.offset; });
      const std::string line = word_output->add_block(k, b);
      if (!line.empty()) std::printf("%s\n", line.c_str());
    }
    if (!cfg.post_process.empty()) {  // fairseq: the loss is per word, the pieces merged
      const std::vector<double>& nll = word_output->word_nll();
      r.count = word_output->count();
      const double mean = r.count > 0 ? -word_output->score_sum() / static_cast<double>(r.count) : 0.0;
      double ss = 0;
      for (double x : nll) ss += (x - mean) * (x - mean);
      r.nll_sum = -word_output->score_sum();
      r.loss2 = mean / kLn2;
      r.ppl = std::pow(2.0, r.loss2);
      r.stderr2 = nll.size() > 1 ? std::sqrt(ss / static_cast<double>(nll.size() - 1) / static_cast<double>(nll.size())) / kLn2 : 0.0;
    }
  }
  std::printf("Evaluated %lld tokens in %.1fs (%.2f tokens/s)\n", static_cast<long long>(tokens), r.seconds,
              static_cast<double>(tokens) / std::max(r.seconds, 1e-9));
  if (words)
    for (const std::string& line : word_output->stats_lines()) std::printf("%s\n", line.c_str());
  if (!cfg.post_process.empty())
    std::printf("Words (--post-process '%s'): %lld, from %lld tokens (%lld BPE pieces merged)\n",
                cfg.post_process.c_str(), static_cast<long long>(r.count), static_cast<long long>(tokens),
                static_cast<long long>(word_output->skipped()));
  std::printf("Loss (base 2): %.4f, Perplexity: %.2f\n", r.loss2, r.ppl);
  std::printf("Standard error of the mean loss (base 2): %.4f\n", r.stderr2);
  if (r.dropped_inf > 0)
    std::printf("Dropped %lld tokens with an infinite score (fairseq drops them too)\n",
                static_cast<long long>(r.dropped_inf));
  if (data.byte_level) std::printf("Bits per byte: %.4f\n", r.loss2);
  std::fflush(stdout);
  if (!cfg.results_json.empty()) {
    nlohmann::json j = eval_result_json(r);
    j["split"] = cfg.gen_subset;
    j["checkpoint"] = cfg.path;
    const nlohmann::json model_config = model->config_json();
    if (model_config.contains("pos")) j["pos"] = model_config.at("pos");
    j["train_tokens_per_sample"] = ck.model.value("tokens_per_sample", info.tokens_per_sample);
    if (cfg.alibi_interpolate) j["alibi_slope_scale"] = slope_scale;  // only then: older results keep their fields
    if (!cfg.post_process.empty()) {
      j["post_process"] = cfg.post_process;
      j["tokens"] = tokens;  // `count` is then the words fairseq's loss divides by
    }
    if (o.num_shards > 1 && r.protocol != EvalProtocol::TruncatedBptt)  // there the shards have no effect
      j["shard"] = {{"num_shards", o.num_shards}, {"shard_id", o.shard_id}};
    j["byte_level"] = data.byte_level;
    if (data.byte_level) j["bits_per_byte"] = r.loss2;
    j["peak_rss_mb"] = peak_rss_mb();
    write_file_atomically(cfg.results_json, "the results (--results-json)", j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace stretch::eval
