#include "eval/eval_lm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/log.h"
#include "data/eval_windows.h"
#include "ops/cross_entropy.h"
#include "train/checkpoint.h"
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
  std::ofstream* dump = nullptr;
  void add(double nll, int64_t offset, int32_t target) {
    if (!std::isfinite(nll)) return;  // fairseq drops ±inf scores from sum and count
    sum += nll;
    sum_sq += nll * nll;
    ++count;
    if (dump) *dump << offset << '\t' << target << '\t' << nll << '\n';
  }
};

// Logit rows per output-layer chunk: about 64 MiB of logits ([rows, V] floats) at a time, so a
// long window never holds its whole [N, V] logit matrix (1 GiB at N = 8192, V = 33,280).
constexpr int64_t kChunkLogitFloats = int64_t{1} << 24;

// Scores rows of `hidden` [N, C] against targets [N]: output projection + log-softmax at
// those rows only, in chunks of rows.
void score_rows(models::TransformerLM& model, const Tensor& hidden, const std::vector<int32_t>& targets,
                const std::vector<int64_t>& offsets, NllStats& stats) {
  const int64_t n = static_cast<int64_t>(targets.size());
  if (n == 0) return;
  const int64_t C = hidden.shape()[-1], V = model.config().vocab_size;
  const int64_t chunk = std::max<int64_t>(1, std::min(n, kChunkLogitFloats / std::max<int64_t>(V, 1)));
  Tensor tgt = Tensor::empty({n}, DType::I32);
  std::copy(targets.begin(), targets.end(), tgt.i32());
  Tensor losses = Tensor::empty({n}), lse = Tensor::empty({n});
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    Tensor rows = Tensor::empty({m, C});  // a copy keeps Var/Tensor views contiguous and owned
    std::copy_n(hidden.f32() + r0 * C, m * C, rows.f32());
    Tensor logits = model.output(autograd::Var(rows)).value();  // [m, V]
    ops::cross_entropy_forward(losses.f32() + r0, lse.f32() + r0, logits.f32(), tgt.i32() + r0,
                               {.n = m, .v = V, .ignore_index = -1000000});
  }
  for (int64_t i = 0; i < n; ++i) stats.add(losses.f32()[i], offsets[i], targets[i]);
}

void evaluate_windows(models::TransformerLM& model, const data::TokenStream& stream, const EvalOptions& o,
                      int64_t L, int64_t c, NllStats& stats) {
  data::EvalWindowParams wp;
  wp.tokens_per_sample = L;
  wp.context_window = c;
  wp.pad = o.pad;
  wp.eos = o.eos;
  int64_t rows = o.max_sentences;
  if (rows <= 0) rows = o.max_tokens > 0 ? std::max<int64_t>(1, o.max_tokens / L) : 1;
  wp.size = {.max_tokens = 0, .max_sentences = rows, .required_batch_size_multiple = 1};
  // Shared ownership is only needed by EvalWindows; the caller keeps `stream` alive.
  std::shared_ptr<const data::TokenStream> s(&stream, [](const data::TokenStream*) {});
  data::EvalWindows windows(s, wp);
  data::Batch batch;
  const int64_t C = model.config().decoder_embed_dim;
  while (windows.next(batch)) {
    Tensor hidden = model.features(batch.src, {}).value();  // [B, W, C]
    const int64_t B = batch.rows(), W = batch.width();
    std::vector<int32_t> targets;
    std::vector<int64_t> offsets;
    Tensor rows_hidden = Tensor::empty({batch.ntokens, C});
    int64_t r = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < W; ++t) {
        const int32_t y = batch.tgt.i32()[b * W + t];
        if (y == o.pad) continue;
        std::copy_n(hidden.f32() + (b * W + t) * C, C, rows_hidden.f32() + r * C);
        targets.push_back(y);
        offsets.push_back(batch.offsets[b] + (t - batch.starts[b]));
        ++r;
      }
    STRETCH_CHECK(r == batch.ntokens, "eval: scored rows " << r << " vs ntokens " << batch.ntokens);
    score_rows(model, rows_hidden, targets, offsets, stats);
  }
}

void evaluate_kv_cache(models::TransformerLM& model, const data::TokenStream& stream, int64_t L, int64_t memory,
                       int32_t eos, NllStats& stats) {
  const auto pos = model.config().pos;
  if (pos == models::PosMethod::Sinusoidal || pos == models::PosMethod::Learned)
    fail_usage(std::string("--kv-cache: needs a relative position method (alibi, t5, rope, none); this model uses ") +
                   models::pos_method_name(pos),
               "evaluate absolute-position models with the window protocol (--context-window)");
  const int64_t N = stream.total_tokens();
  const int64_t C = model.config().decoder_embed_dim;
  models::KvCache cache;
  for (int64_t start = 0; start < N; start += L) {
    const int64_t n = std::min(L, N - start);
    Tensor src = Tensor::empty({1, n}, DType::I32);
    std::vector<int32_t> targets = stream.tokens(start, n);
    src.i32()[0] = start == 0 ? eos : stream.tokens(start - 1, 1)[0];
    std::copy_n(targets.data(), n - 1, src.i32() + 1);
    Tensor hidden = model.features(src, {.cache = &cache}).value();  // [1, n, C]
    std::vector<int64_t> offsets(n);
    for (int64_t i = 0; i < n; ++i) offsets[i] = start + i;
    score_rows(model, hidden.view({n, C}), targets, offsets, stats);
    // Keep the keys/values of the last `memory` tokens.
    for (size_t l = 0; l < cache.k.size(); ++l)
      for (Tensor* t : {&cache.k[l], &cache.v[l]}) {
        const int64_t B = t->dim(0), H = t->dim(1), S = t->dim(2), D = t->dim(3);
        if (S <= memory) continue;
        Tensor kept = Tensor::empty({B, H, memory, D});
        for (int64_t bh = 0; bh < B * H; ++bh)
          std::copy_n(t->f32() + (bh * S + S - memory) * D, memory * D, kept.f32() + bh * memory * D);
        *t = kept;
      }
  }
}

}  // namespace

EvalResult evaluate(models::TransformerLM& model, const data::TokenStream& stream, const EvalOptions& o) {
  autograd::NoGradGuard no_grad;
  const int64_t L = o.tokens_per_sample > 0 ? o.tokens_per_sample : model.config().tokens_per_sample;
  int64_t c = o.context_window;
  if (o.stride > 0) {
    if (o.stride > L) fail_usage("--stride " + std::to_string(o.stride) + " is larger than --tokens-per-sample " + std::to_string(L));
    c = L - o.stride;
  }
  if (c < 0 || c >= L)
    fail_usage("--context-window " + std::to_string(c) + " must be in [0, tokens-per-sample) = [0, " + std::to_string(L) + ")");
  std::ofstream dump;
  NllStats stats;
  if (!o.word_probs_path.empty()) {
    dump.open(o.word_probs_path);
    if (!dump) fail_io(o.word_probs_path, "cannot write the per-token dump");
    dump << "offset\ttarget\tnll_nats\n";
    stats.dump = &dump;
  }
  const double t0 = now_seconds();
  EvalResult r;
  if (o.protocol == EvalProtocol::KvCache) {
    const int64_t memory = c > 0 ? c : L;
    evaluate_kv_cache(model, stream, L, memory, o.eos, stats);
    r.protocol = "kv-cache (Transformer-XL style: segments of " + std::to_string(L) + ", memory " +
                 std::to_string(memory) + "; NOT the fairseq-eval-lm protocol)";
  } else {
    evaluate_windows(model, stream, o, L, c, stats);
    r.protocol = c == 0 ? "non-overlapping, L = " + std::to_string(L)
                        : "sliding window, L = " + std::to_string(L) + ", context " + std::to_string(c) +
                              " (stride " + std::to_string(L - c) + ")";
  }
  r.seconds = now_seconds() - t0;
  r.count = stats.count;
  if (stats.count == 0) fail_input("eval-lm", "no token was scored", "is the split empty?");
  const double mean = stats.sum / stats.count;
  const double var = std::max(0.0, stats.sum_sq / stats.count - mean * mean);
  r.loss2 = mean / kLn2;
  r.ppl = std::pow(2.0, r.loss2);
  r.stderr2 = stats.count > 1 ? std::sqrt(var / (stats.count - 1)) / kLn2 : 0.0;
  r.tokens_per_second = stats.count / std::max(r.seconds, 1e-9);
  return r;
}

int run_eval_lm(const EvalLmConfig& cfg) {
  train::CheckpointContents ck;
  auto model = train::load_model(cfg.path, cfg.overrides, &ck);
  train::LmData data = train::open_lm_data(cfg.data);
  if (data.vocab_size != model->config().vocab_size || data.dict_hash != ck.dict_hash)
    fail_input(data.dict_path, "is not the dictionary the checkpoint was trained with (" + std::to_string(data.vocab_size) +
                                   " symbols, hash " + data.dict_hash + "; checkpoint: " +
                                   std::to_string(model->config().vocab_size) + " symbols, hash " + ck.dict_hash + ")",
               "evaluate on a data-bin binarized with the training dictionary (preprocess --srcdict)");
  auto stream = train::open_split_stream(cfg.data, cfg.gen_subset, data);
  EvalOptions o = cfg.options;
  o.pad = data.pad;
  o.eos = data.eos;
  EvalResult r = evaluate(*model, *stream, o);
  std::printf("stretch | eval-lm | %s | %s\n", cfg.gen_subset.c_str(), r.protocol.c_str());
  std::printf("Evaluated %lld tokens in %.1fs (%.2f tokens/s)\n", static_cast<long long>(r.count), r.seconds,
              r.tokens_per_second);
  std::printf("Loss (base 2): %.4f, Perplexity: %.2f\n", r.loss2, r.ppl);
  std::printf("Standard error of the mean loss (base 2): %.4f\n", r.stderr2);
  if (data.byte_level) std::printf("Bits per byte: %.4f\n", r.loss2);
  return 0;
}

}  // namespace stretch::eval
