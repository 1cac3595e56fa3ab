// eval-lm in process (eval/eval_lm.h): the windows and scoring against the direct definition
// of REFERENCE.md §4.4 (eval_test_util.h), §4.4's test-vector tables at the eval level, the
// --stride form, batching and chunking invariance, the per-token dump, evaluation past the
// training length, and the --kv-cache protocol.
//
// Tolerances: stretch and the reference run the same float32 model, but with different
// batch shapes (B windows and padded rows vs one unpadded window), so GEMM and attention tiles
// sum in a different order: per-token NLLs agree to ~1e-6 relative (fp32 rounding 6e-8 times
// sums over K ≤ 64). Sums of tens to hundreds of NLLs are compared at 1e-5 relative, ten
// times that. A window bug (a context token scored, a target dropped, the wrong input row)
// changes the count or moves the sum by ≥ 1e-2.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "eval/eval_lm.h"
#include "eval_test_util.h"

namespace stretch::eval {
namespace {

using models::PosMethod;
using testing::reference_eval;
using testing::tiny_model;
using testing::window_nll;

data::MemoryTokenStream memory_stream(const std::vector<int32_t>& s) { return data::MemoryTokenStream({s}); }

void expect_close(double got, double want, double rtol, const std::string& what) {
  EXPECT_NEAR(got, want, rtol * std::abs(want)) << what;
}

// §4.4's tables (l = 4, stream t10..t19): the nll of each listed (input row, target, position)
// computed by a full forward of exactly that row, summed, equals eval-lm's figure.
struct TableRow {
  std::vector<int32_t> input;
  int32_t target;
  int32_t position;
};

double table_sum(models::TransformerLM& model, const std::vector<TableRow>& rows) {
  double sum = 0;
  for (const auto& r : rows) {
    std::vector<int32_t> targets(r.input.size(), 1);
    targets[static_cast<size_t>(r.position)] = r.target;
    sum += window_nll(model, r.input, targets)[static_cast<size_t>(r.position)];
  }
  return sum;
}

std::vector<int32_t> stream_10_to_19() {
  std::vector<int32_t> s;
  for (int32_t t = 10; t <= 19; ++t) s.push_back(t);
  return s;
}

TEST(EvalLm, ReferenceTableContextWindow3) {
  auto model = tiny_model(PosMethod::Alibi, 24);
  // ([2,1,1,1],[10,...],0); ([2,10,1,1],11 at 1); ([2,10,11,1],12 at 2); ([2,10,11,12],13 at 3);
  // then ([t-3..t],t+1 at 3) for t = 13..18.
  std::vector<TableRow> rows = {{{2, 1, 1, 1}, 10, 0}, {{2, 10, 1, 1}, 11, 1}, {{2, 10, 11, 1}, 12, 2},
                                {{2, 10, 11, 12}, 13, 3}};
  for (int32_t t = 13; t <= 18; ++t) rows.push_back({{t - 3, t - 2, t - 1, t}, t + 1, 3});
  const double want = table_sum(*model, rows);
  auto s = memory_stream(stream_10_to_19());
  for (int64_t rows_per_pass : {1, 3, 0}) {
    EvalResult r = evaluate(*model, s, {.tokens_per_sample = 4, .context_window = 3, .max_sentences = rows_per_pass});
    EXPECT_EQ(r.count, 10);
    expect_close(r.nll_sum, want, 1e-5, "c = 3, windows per pass " + std::to_string(rows_per_pass));
  }
}

TEST(EvalLm, ReferenceTableContextWindow2AndBlocks) {
  auto model = tiny_model(PosMethod::Sinusoidal, 24);
  // c = 2: ([2,10,1,1], 10 at 0, 11 at 1); ([2,10,11,12], 12 at 2, 13 at 3); ([11..14], 14, 15 at 2, 3); ...
  std::vector<TableRow> c2 = {{{2, 10, 1, 1}, 10, 0}, {{2, 10, 1, 1}, 11, 1}, {{2, 10, 11, 12}, 12, 2},
                              {{2, 10, 11, 12}, 13, 3}};
  for (int32_t t = 11; t <= 15; t += 2)
    for (int32_t k = 0; k < 2; ++k) c2.push_back({{t, t + 1, t + 2, t + 3}, t + 3 + k, 2 + k});
  auto s = memory_stream(stream_10_to_19());
  EvalResult r2 = evaluate(*model, s, {.tokens_per_sample = 4, .context_window = 2});
  EXPECT_EQ(r2.count, 10);
  expect_close(r2.nll_sum, table_sum(*model, c2), 1e-5, "c = 2");
  // c = 0 (§4.3): src [2,10,11,12] tgt [10..13]; [13..16] -> [14..17]; [17,18] -> [18,19].
  std::vector<TableRow> c0;
  for (int32_t k = 0; k < 4; ++k) c0.push_back({{2, 10, 11, 12}, 10 + k, k});
  for (int32_t k = 0; k < 4; ++k) c0.push_back({{13, 14, 15, 16}, 14 + k, k});
  for (int32_t k = 0; k < 2; ++k) c0.push_back({{17, 18}, 18 + k, k});
  EvalResult r0 = evaluate(*model, s, {.tokens_per_sample = 4, .context_window = 0});
  EXPECT_EQ(r0.count, 10);
  expect_close(r0.nll_sum, table_sum(*model, c0), 1e-5, "c = 0");
  EXPECT_NEAR(r0.loss2, r0.nll_sum / 10 / std::log(2.0), 1e-12);
  EXPECT_NEAR(r0.ppl, std::exp(r0.nll_sum / 10), 1e-9 * r0.ppl);
}

// Every position method, non-overlapping, context windows and strides, several batchings,
// against the direct definition on a 61-token stream (not a multiple of any block size).
class EvalLmDirect : public ::testing::TestWithParam<PosMethod> {};

TEST_P(EvalLmDirect, MatchesTheDirectDefinition) {
  auto model = tiny_model(GetParam(), 30);
  const auto stream = testing::random_stream(61, 30, 11);
  auto s = memory_stream(stream);
  struct Case {
    int64_t L, c, max_sentences, max_tokens, chunk;
  };
  for (const Case& k : {Case{8, 0, 1, 0, 0}, Case{8, 0, 3, 0, 5}, Case{12, 0, 0, 0, 0}, Case{8, 5, 4, 0, 0},
                        Case{8, 7, 0, 0, 3}, Case{8, 7, 1, 0, 0}, Case{6, 2, 0, 8, 0}, Case{16, 1, 2, 0, 0}}) {
    const std::string what = std::string(models::pos_method_name(GetParam())) + " L " + std::to_string(k.L) + " c " +
                             std::to_string(k.c) + " rows " + std::to_string(k.max_sentences) + " max_tokens " +
                             std::to_string(k.max_tokens) + " chunk " + std::to_string(k.chunk);
    const auto want = reference_eval(*model, stream, k.L, k.c);
    EvalResult r = evaluate(*model, s, {.tokens_per_sample = k.L, .context_window = k.c,
                                        .max_sentences = k.max_sentences, .max_tokens = k.max_tokens,
                                        .score_chunk_rows = k.chunk});
    EXPECT_EQ(r.count, 61) << what;
    EXPECT_EQ(want.count, 61) << what;
    expect_close(r.nll_sum, want.nll_sum, 1e-5, what);
    // The --stride form is the same evaluation.
    EvalResult rs = evaluate(*model, s, {.tokens_per_sample = k.L, .stride = k.L - k.c,
                                         .max_sentences = k.max_sentences, .max_tokens = k.max_tokens});
    EXPECT_EQ(rs.count, 61) << what;
    expect_close(rs.nll_sum, r.nll_sum, 1e-6, what + " (stride form)");
  }
}

INSTANTIATE_TEST_SUITE_P(AllPositions, EvalLmDirect,
                         ::testing::Values(PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope,
                                           PosMethod::T5, PosMethod::None),
                         [](const auto& info) { return std::string(models::pos_method_name(info.param)); });

TEST(EvalLm, BatchesManyWindowsPerPass) {
  auto model = tiny_model(PosMethod::Alibi, 30);
  auto s = memory_stream(testing::random_stream(100, 30, 4));
  // Stride 1 at L = 8: 100 windows. Unlimited: one pass holds kForwardTokens / 8 windows.
  EvalResult all = evaluate(*model, s, {.tokens_per_sample = 8, .context_window = 7});
  EXPECT_EQ(all.forward_passes, 1);
  EXPECT_EQ(all.max_rows, 100);
  EvalResult one = evaluate(*model, s, {.tokens_per_sample = 8, .context_window = 7, .max_sentences = 1});
  EXPECT_EQ(one.forward_passes, 100);
  // fairseq's --max-tokens counts block tokens (1 per window here), not the context.
  EvalResult mt = evaluate(*model, s, {.tokens_per_sample = 8, .context_window = 7, .max_tokens = 8});
  EXPECT_EQ(mt.forward_passes, 13);
  EXPECT_EQ(mt.max_rows, 8);
  expect_close(one.nll_sum, all.nll_sum, 1e-5, "batching");
  expect_close(mt.nll_sum, all.nll_sum, 1e-5, "batching by max_tokens");
  // The forward budget caps the windows of one pass even when the flags allow more (rows are
  // cut to their used width, here <= 101, so this stays cheap).
  EvalResult capped = evaluate(*model, s, {.tokens_per_sample = 2048, .context_window = 2047, .max_tokens = 1000});
  EXPECT_EQ(capped.max_rows, kForwardTokens / 2048);
  expect_close(capped.nll_sum, testing::reference_eval(*model, testing::random_stream(100, 30, 4), 2048, 2047).nll_sum,
               1e-5, "L 2048 on a 100-token stream");
}

TEST(EvalLm, WordProbsDumpScoresEachTokenOnce) {
  auto model = tiny_model(PosMethod::Rope, 30);
  const auto stream = testing::random_stream(37, 30, 8);
  auto s = memory_stream(stream);
  testing::TempDir dir;
  const std::string path = dir / "nll.tsv";
  EvalResult r = evaluate(*model, s, {.tokens_per_sample = 8, .context_window = 3, .max_sentences = 2,
                                      .word_probs_path = path});
  std::ifstream f(path);
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, "offset\ttarget\tnll_nats");
  std::vector<int> seen(stream.size(), 0);
  std::vector<double> nlls;
  int64_t offset;
  int32_t target;
  double nll;
  while (f >> offset >> target >> nll) {
    ASSERT_GE(offset, 0);
    ASSERT_LT(offset, 37);
    EXPECT_EQ(target, stream[static_cast<size_t>(offset)]) << "offset " << offset;
    ++seen[static_cast<size_t>(offset)];
    nlls.push_back(nll);
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "offset " << i;
  // The dump prints 9 significant digits. The standard error of the mean NLL (bits) is the
  // sample standard deviation over sqrt(count), computed here two-pass from the dump.
  const double n = static_cast<double>(nlls.size()), ln2 = std::log(2.0);
  double sum = 0, ss = 0;
  for (double x : nlls) sum += x;
  for (double x : nlls) ss += (x - sum / n) * (x - sum / n);
  expect_close(sum, r.nll_sum, 1e-7, "dump sum");
  expect_close(r.loss2, sum / n / ln2, 1e-7, "loss");
  expect_close(r.stderr2, std::sqrt(ss / (n - 1) / n) / ln2, 1e-5, "standard error");
}

TEST(EvalLm, BadOptionsAreUsageErrors) {
  auto model = tiny_model(PosMethod::Alibi, 30);
  auto s = memory_stream(testing::random_stream(20, 30, 1));
  auto usage = [&](const EvalOptions& o, const std::string& needle) {
    try {
      evaluate(*model, s, o);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  usage({.tokens_per_sample = 8, .context_window = 8}, "--context-window 8");
  usage({.tokens_per_sample = 8, .stride = 9}, "--stride 9");
  usage({.tokens_per_sample = 8, .context_window = 3, .stride = 2}, "disagree");
  usage({.tokens_per_sample = 8, .stride = 2, .protocol = EvalProtocol::KvCache}, "--kv-cache");
}

// §1.5: sinusoidal positions run at any length; learned positions past their table are the
// published failure, a usage error naming the table, never a crash.
TEST(EvalLm, LongerThanTraining) {
  auto s = memory_stream(testing::random_stream(200, 30, 2));
  auto sin = tiny_model(PosMethod::Sinusoidal, 30);  // trained L 8, table size 16 (unused)
  const auto want = reference_eval(*sin, testing::random_stream(200, 30, 2), 64, 0);
  EvalResult r = evaluate(*sin, s, {.tokens_per_sample = 64});
  EXPECT_EQ(r.count, 200);
  expect_close(r.nll_sum, want.nll_sum, 1e-5, "sinusoidal at L 64");
  auto learned = tiny_model(PosMethod::Learned, 30);
  EXPECT_EQ(evaluate(*learned, s, {.tokens_per_sample = 16}).count, 200);  // the whole table
  try {
    evaluate(*learned, s, {.tokens_per_sample = 17});
    FAIL() << "no error past the learned table";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("learned positions"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_target_positions = 16"), std::string::npos) << e.what();
  }
}

// --kv-cache. Why it equals a non-overlapping evaluation when the memory M holds the whole
// stream (N tokens): segment k feeds inputs s'[kL, (k+1)L) (s' = eos + stream, the same
// shift as the window protocol) and attends to the cached keys/values of every earlier
// input, so token i is predicted from s'[0 : i+1] — exactly the context it has in ONE
// non-overlapping window of length N (L' = N, c = 0). The cached keys/values of earlier tokens
// are the ones a full pass computes: causal attention means position j's keys/values in layer l
// depend only on inputs ≤ j (the same argument as tests/models/test_kv_cache.cpp), with no
// padding in either run. Positions: alibi and t5 depend on i − j, which the kernel gets from
// the cache offset; rope rotates by the absolute position cache.length + t, equal to the
// window's t' = i; none has no positions. So for these four methods the two agree up to fp32
// summation order. They differ once M < N (contexts are then cut at segment boundaries
// differently from any window protocol), and sinusoidal/learned are refused: their absolute
// positions would keep growing across segments.
class EvalLmKvCache : public ::testing::TestWithParam<PosMethod> {};

TEST_P(EvalLmKvCache, FullMemoryEqualsOneNonOverlappingWindow) {
  auto model = tiny_model(GetParam(), 30);
  const auto stream = testing::random_stream(45, 30, 6);
  auto s = memory_stream(stream);
  EvalResult kv = evaluate(*model, s, {.tokens_per_sample = 8, .context_window = 64, .protocol = EvalProtocol::KvCache});
  EvalResult full = evaluate(*model, s, {.tokens_per_sample = 45});
  EXPECT_EQ(kv.count, 45);
  EXPECT_EQ(kv.forward_passes, 6);  // ceil(45 / 8) segments
  EXPECT_EQ(full.forward_passes, 1);
  // fp32: the cached path splits the key loop at segment boundaries (1e-4, as test_kv_cache).
  expect_close(kv.nll_sum, full.nll_sum, 1e-5, models::pos_method_name(GetParam()));
  EXPECT_NE(kv.protocol_text.find("NOT the fairseq-eval-lm protocol"), std::string::npos) << kv.protocol_text;
  EXPECT_FALSE(eval_result_json(kv).at("fairseq_protocol").get<bool>());
  EXPECT_TRUE(eval_result_json(full).at("fairseq_protocol").get<bool>());
}

// With a short memory M the cached keys of layers >= 1 were computed from the contexts their
// tokens had back then, so no window protocol reproduces it — except with ONE layer, where a
// key/value depends only on its own input token (and, for rope, its position, which enters
// q·k only through i − j). Then segment k's tokens see exactly the inputs
// s'[max(0, kL − M) : i + 1], which is the window protocol with blocks of L new tokens and
// context M: --tokens-per-sample L + M --context-window M.
TEST_P(EvalLmKvCache, OneLayerShortMemoryEqualsWindowsWithContextM) {
  models::TransformerLMConfig cfg = testing::tiny_config(GetParam(), 30);
  cfg.decoder_layers = 1;
  models::TransformerLM model(cfg);
  model.init(9);
  auto s = memory_stream(testing::random_stream(45, 30, 7));
  EvalResult kv = evaluate(model, s, {.tokens_per_sample = 8, .context_window = 5, .protocol = EvalProtocol::KvCache});
  EvalResult win = evaluate(model, s, {.tokens_per_sample = 13, .context_window = 5});
  EXPECT_EQ(kv.count, 45);
  EXPECT_EQ(kv.context_window, 5);
  expect_close(kv.nll_sum, win.nll_sum, 1e-5, models::pos_method_name(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(RelativePositions, EvalLmKvCache,
                         ::testing::Values(PosMethod::Alibi, PosMethod::Rope, PosMethod::T5, PosMethod::None),
                         [](const auto& info) { return std::string(models::pos_method_name(info.param)); });

// NormFormer (--scale-*): the scored-rows shortcut of the last block (context windows, several
// windows per pass) and the KV cache run the block's scales and LayerNorms on fewer rows than a
// full pass; both must still give the direct definition. The scales and LayerNorms are moved off
// their init (at 1 and 1 / 0 a scale on the wrong rows would pass).
TEST(EvalLm, NormFormerWindowsAndKvCacheMatchTheDirectDefinition) {
  models::TransformerLMConfig cfg = testing::tiny_config(PosMethod::Alibi, 30);
  cfg.scale_heads = cfg.scale_attn = cfg.scale_fc = cfg.scale_resids = true;
  models::TransformerLM model(cfg);
  model.init(7);
  Rng rng(7, 3);
  int perturbed = 0;
  for (const auto& [name, v] : model.params().items())
    for (const char* piece : {".c_attn", ".w_resid", ".attn_ln.", ".ffn_layernorm."})
      if (name.find(piece) != std::string::npos) {
        for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] += rng.uniform(-0.5f, 0.5f);
        ++perturbed;
      }
  EXPECT_EQ(perturbed, 2 * 6);  // per layer: c_attn, w_resid, attn_ln.{weight,bias}, ffn_layernorm.{weight,bias}
  const auto stream = testing::random_stream(61, 30, 13);
  auto s = memory_stream(stream);
  for (auto [L, c] : {std::pair<int64_t, int64_t>{8, 0}, {8, 5}, {12, 7}}) {
    const auto want = reference_eval(model, stream, L, c);
    EvalResult r = evaluate(model, s, {.tokens_per_sample = L, .context_window = c, .max_sentences = 3});
    EXPECT_EQ(r.count, 61);
    expect_close(r.nll_sum, want.nll_sum, 1e-5, "L " + std::to_string(L) + " c " + std::to_string(c));
  }
  EvalResult kv = evaluate(model, s, {.tokens_per_sample = 8, .context_window = 64, .protocol = EvalProtocol::KvCache});
  EvalResult full = evaluate(model, s, {.tokens_per_sample = 61});
  EXPECT_EQ(kv.count, 61);
  expect_close(kv.nll_sum, full.nll_sum, 1e-5, "kv cache");
}

TEST(EvalLm, KvCacheRefusesAbsolutePositions) {
  auto s = memory_stream(testing::random_stream(20, 30, 1));
  for (PosMethod p : {PosMethod::Sinusoidal, PosMethod::Learned}) {
    auto model = tiny_model(p, 30);
    try {
      evaluate(*model, s, {.tokens_per_sample = 8, .protocol = EvalProtocol::KvCache});
      ADD_FAILURE() << "no error for " << models::pos_method_name(p);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("--kv-cache: needs a relative position method"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace stretch::eval
