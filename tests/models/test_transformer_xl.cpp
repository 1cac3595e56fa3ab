// The transformer_xl family (models/transformer_xl/): config and registry, HF's parameter names
// and count, usage errors, the memory semantics (HF's zero start, the original's empty start), the
// segment state's save/load, and the equality a relative-position memory must satisfy: with the
// original's empty start and a memory that keeps every earlier token, segment k's hidden states
// equal the rows of ONE forward over the concatenation (the distances across the memory boundary
// are the long forward's, clamp_len included). A query counted from the segment start, or R
// indexed by key instead of distance, fails it by far more than the fp32 summation order (1e-4).
// The float64 PyTorch parity is tests/parity/run_xl_parity.py.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <cstring>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/registry.h"
#include "models/transformer_lm/hidden_memory.h"
#include "models/transformer_xl/transformer_xl.h"

namespace stretch::models {
namespace {

TransformerXLConfig small(int64_t mem_len) {
  TransformerXLConfig c = transformer_xl_preset("transformer_xl_tiny");
  c.vocab_size = 40;
  c.n_layer = 2;
  c.d_model = 24;
  c.n_head = 3;  // non-power-of-two heads
  c.d_head = 6;  // H·D = 18 ≠ C
  c.d_inner = 32;
  c.mem_len = mem_len;
  return c;
}

Tensor random_tokens(int64_t B, int64_t T, uint64_t seed) {
  Rng rng(seed);
  Tensor src = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i) src.i32()[i] = 4 + static_cast<int32_t>(rng.below(36));
  return src;
}

Tensor columns(const Tensor& src, int64_t t0, int64_t n) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor out = Tensor::empty({B, n}, DType::I32);
  for (int64_t b = 0; b < B; ++b) std::copy_n(src.i32() + b * T + t0, n, out.i32() + b * n);
  return out;
}

// Max |seg − full[:, t0 : t0 + n]| / max |full|.
double max_rel_diff(const Tensor& seg, const Tensor& full, int64_t t0) {
  const int64_t B = seg.dim(0), n = seg.dim(1), C = seg.dim(2), T = full.dim(1);
  double worst = 0, scale = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const double f = full.f32()[(b * T + t0 + t) * C + c];
        worst = std::max(worst, std::abs(seg.f32()[(b * n + t) * C + c] - f));
        scale = std::max(scale, std::abs(f));
      }
  return worst / scale;
}

void copy_params(const TransformerXL& from, TransformerXL& to) {
  ASSERT_EQ(from.params().items().size(), to.params().items().size());
  for (size_t i = 0; i < from.params().items().size(); ++i) {
    const auto& [name, v] = from.params().items()[i];
    ASSERT_EQ(name, to.params().items()[i].first);
    std::memcpy(to.params().items()[i].second.data(), v.data(), v.numel() * sizeof(float));
  }
}

TEST(TransformerXL, RegistryNamesAndCount) {
  nlohmann::json cfg = resolve_config("transformer_xl", {{"n_layer", 3}, {"d_model", 40}}, 64);
  EXPECT_EQ(cfg.at("arch"), "transformer_xl");
  EXPECT_EQ(cfg.at("n_head"), 10);  // fairseq's defaults
  EXPECT_EQ(cfg.at("d_head"), 50);
  EXPECT_EQ(cfg.at("untie_r"), true);
  EXPECT_EQ(cfg.at("clamp_len"), -1);
  cfg["vocab_size"] = 48;
  auto model = build_model(cfg);
  EXPECT_EQ(model->info().family, "transformer_xl");
  const auto& items = model->params().items();
  EXPECT_EQ(items.front().first, "decoder.model.transformer.word_emb.emb_layers.0.weight");
  EXPECT_EQ(items[1].first, "decoder.model.transformer.layers.0.dec_attn.r_r_bias");
  EXPECT_EQ(items[3].first, "decoder.model.transformer.layers.0.dec_attn.qkv_net.weight");
  EXPECT_EQ(items[3].second.shape(), (Shape{3 * 500, 40}));
  EXPECT_EQ(items.back().first, "decoder.model.crit.out_layers.0.bias");
  // Hand count: V·C + V, per layer 2·H·D (r biases) + 3HD·C + C·HD + HD·C + 2C + (C·F + F) + (F·C + C) + 2C.
  const int64_t V = 48, C = 40, HD = 500, F = 1000, H2D = 2 * 500;
  const int64_t want = V * C + V + 3 * (H2D + 5 * HD * C + 2 * C + C * F + F + F * C + C + 2 * C);
  EXPECT_EQ(model->params().numel(), want);
  EXPECT_EQ(TransformerXL::parameter_count(TransformerXLConfig::from_json(cfg)), want);
  // Shared r biases: one pair at the top, none per layer.
  cfg["untie_r"] = false;
  auto shared = build_model(cfg);
  EXPECT_EQ(shared->params().items().front().first, "decoder.model.transformer.r_w_bias");
  EXPECT_EQ(shared->params().numel(), want - 2 * H2D);
  // JSON round trip.
  EXPECT_EQ(TransformerXLConfig::from_json(cfg).to_json(), cfg);
}

void expect_usage(const nlohmann::json& given, const std::string& needle, int64_t V = 0) {
  try {
    nlohmann::json cfg = resolve_config("transformer_xl_tiny", given, 32);
    if (V > 0) {
      cfg["vocab_size"] = V;
      (void)build_model(cfg);
    } else {
      validate_config(cfg);
    }
    ADD_FAILURE() << "no error for " << given.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TransformerXL, UsageErrors) {
  expect_usage({{"n_head", 0}}, "--n-head");
  expect_usage({{"same_length", true}}, "--same-length needs --mem-len");
  expect_usage({{"cutoffs", "100,x"}}, "--cutoffs");
  expect_usage({{"div_val", 0}}, "--div-val 0");
  expect_usage({{"cutoffs", "20,10"}}, "--cutoffs 20,10");
  // div_val 8 over 4 bands leaves the last band 64 // 8^3 = 0 dimensions: refused with V known.
  expect_usage({{"cutoffs", "10,20,30"}, {"div_val", 8}}, "--div-val 8", 40);
  expect_usage({{"dropatt", 1.5}}, "--dropatt");
  expect_usage({{"criterion", "adaptive_loss"}}, "--criterion");
  expect_usage({{"decoder_layers", 3}}, "unknown transformer_xl config key 'decoder_layers'");
  expect_usage({{"d_model", 63}}, "--d-model");
  // The default cutoffs are dropped for a small vocabulary (fairseq's rule): the full softmax.
  nlohmann::json ok = resolve_config("transformer_xl_tiny", nlohmann::json::object(), 32);
  ok["vocab_size"] = 40;
  EXPECT_NO_THROW((void)build_model(ok));
  // eval-lm's overrides: mem_len, clamp_len, same_length are evaluation-time keys; d_model is not.
  ok["mem_len"] = 8;
  EXPECT_NO_THROW((void)apply_overrides(ok, {{"mem_len", 21}, {"clamp_len", 8}, {"same_length", true}},
                                        OverrideUse::Evaluation, "--model-overrides"));
  EXPECT_THROW((void)apply_overrides(ok, {{"d_model", 32}}, OverrideUse::Evaluation, "--model-overrides"), Error);
}

// HF's TransfoXL at the WikiText-103 base size (16 × 410, 10 heads of 41, 2100, untied r, V 267,744,
// cutoffs 20000/40000/200000, div_val 1) has 151,123,537 parameters: the count fairseq's README
// prints (REFERENCE.md §6.4), not derived from this code.
TEST(TransformerXL, Wiki103ParameterCountIsFairseqs) {
  TransformerXLConfig c = transformer_xl_preset("transformer_xl");
  c.n_layer = 16, c.d_model = 410, c.n_head = 10, c.d_head = 41, c.d_inner = 2100, c.vocab_size = 267744;
  EXPECT_EQ(TransformerXL::parameter_count(c), 151123537);
}

// The adaptive layouts' names, shapes and tying (HF's named_parameters, the tied weights listed
// once), and their count against a hand formula.
TEST(TransformerXL, AdaptiveSoftmaxNamesShapesAndCount) {
  TransformerXLConfig c = small(0);
  c.vocab_size = 40;
  c.cutoffs = "10,25";
  auto one = std::make_unique<TransformerXL>(c);
  std::map<std::string, Shape> got;
  for (const auto& [name, v] : one->params().items()) got[name] = v.shape();
  const std::string crit = "decoder.model.crit.";
  EXPECT_EQ(got.at(crit + "cluster_weight"), (Shape{2, 24}));
  EXPECT_EQ(got.at(crit + "cluster_bias"), (Shape{2}));
  EXPECT_EQ(got.at(crit + "out_layers.0.bias"), (Shape{40}));
  EXPECT_EQ(got.count(crit + "out_layers.0.weight"), 0u);  // tied to word_emb.emb_layers.0.weight
  const int64_t layers = one->params().numel() - (40 * 24 + 40 + 2 * 24 + 2);
  EXPECT_EQ(TransformerXL::parameter_count(c), one->params().numel());
  c.div_val = 2;  // bands [0,10) d 24, [10,25) d 12, [25,40) d 6
  auto two = std::make_unique<TransformerXL>(c);
  got.clear();
  for (const auto& [name, v] : two->params().items()) got[name] = v.shape();
  const std::string emb = "decoder.model.transformer.word_emb.";
  EXPECT_EQ(got.at(emb + "emb_layers.0.weight"), (Shape{10, 24}));
  EXPECT_EQ(got.at(emb + "emb_layers.1.weight"), (Shape{15, 12}));
  EXPECT_EQ(got.at(emb + "emb_layers.2.weight"), (Shape{15, 6}));
  EXPECT_EQ(got.at(emb + "emb_projs.0"), (Shape{24, 24}));
  EXPECT_EQ(got.at(emb + "emb_projs.2"), (Shape{24, 6}));
  EXPECT_EQ(got.at(crit + "out_layers.1.bias"), (Shape{15}));
  EXPECT_EQ(got.at(crit + "out_projs.0"), (Shape{24, 24}));  // the head's own (tie_projs[0] = False)
  EXPECT_EQ(got.count(crit + "out_projs.1"), 0u);             // tied to emb_projs.1
  EXPECT_EQ(two->params().items().front().first, emb + "emb_layers.0.weight");
  const int64_t tables = 10 * 24 + 15 * 12 + 15 * 6, projs = 24 * (24 + 12 + 6);
  EXPECT_EQ(two->params().numel(), layers + tables + projs + 40 + 24 * 24 + 2 * 24 + 2);
  EXPECT_EQ(TransformerXL::parameter_count(c), two->params().numel());
  // init: HF's proj_init_std 0.01 for the projections, cluster_bias 0.
  two->init(3);
  for (const auto& [name, v] : two->params().items()) {
    double ss = 0;
    for (int64_t i = 0; i < v.numel(); ++i) ss += static_cast<double>(v.data()[i]) * v.data()[i];
    const double rms = std::sqrt(ss / static_cast<double>(v.numel()));
    if (name == emb + "emb_projs.0") {
      EXPECT_NEAR(rms, 0.01, 0.002) << name;
    } else if (name == crit + "cluster_weight") {
      EXPECT_GT(rms, 0.01) << name;  // N(0, 0.02)
    } else if (name == crit + "cluster_bias") {
      EXPECT_EQ(rms, 0.0) << name;
    }
  }
}

// The head's three read-outs agree: exp(log_scores) sums to 1 per row, target_nll is minus the
// target's log-score, the validation loss is their sum over non-pad targets (and counts them).
TEST(TransformerXL, AdaptiveSoftmaxReadoutsAgree) {
  for (int64_t div_val : {1, 2}) {
    TransformerXLConfig c = small(6);
    c.vocab_size = 40, c.cutoffs = "10,25", c.div_val = div_val;
    TransformerXL m(c);
    m.init(5);
    autograd::NoGradGuard no_grad;
    const int64_t B = 2, T = 7, V = 40, C = 24;
    const Tensor src = random_tokens(B, T, 8);
    Tensor tgt = random_tokens(B, T, 9);
    tgt.i32()[3] = 1;  // a pad target
    const Tensor h = m.features(src, {}).value();  // [B, T, C]
    const Tensor lp = m.head().log_scores(h);      // [B, T, V]
    std::vector<int64_t> rows;
    std::vector<int32_t> words;
    double sum_nll = 0;
    for (int64_t i = 0; i < B * T; ++i) {
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(lp.f32()[i * V + v]));
      EXPECT_NEAR(z, 1.0, 1e-5) << "row " << i << " div_val " << div_val;
      rows.push_back(i);
      words.push_back(tgt.i32()[i] == 1 ? 5 : tgt.i32()[i]);
      if (tgt.i32()[i] != 1) sum_nll -= lp.f32()[i * V + tgt.i32()[i]];
    }
    std::vector<float> nll(rows.size());
    m.head().target_nll(h.view({B * T, C}), rows, words, nll.data(), 3);  // 3-row chunks
    for (size_t i = 0; i < rows.size(); ++i)
      EXPECT_NEAR(nll[i], -lp.f32()[static_cast<int64_t>(i) * V + words[i]], 1e-5) << "row " << i;
    const nn::HeadLoss loss = m.head().loss(Var(h), tgt, 1, nn::LossUse::Validation);
    EXPECT_EQ(loss.ntokens, B * T - 1);
    EXPECT_NEAR(loss.loss.value().f32()[0], sum_nll, 1e-4 * sum_nll);
  }
}

TEST(TransformerXL, RelativeEmbeddingRows) {
  const Tensor r = xl_relative_embedding(6, 8, 3);  // [6, 8], clamp 3
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(r.f32()[k], 0.f);      // sin(0)
    EXPECT_EQ(r.f32()[4 + k], 1.f);  // cos(0)
  }
  EXPECT_FLOAT_EQ(r.f32()[1 * 8 + 0], std::sin(1.0f));
  EXPECT_FLOAT_EQ(r.f32()[2 * 8 + 1], std::sin(2.0f / 10.0f));  // f_1 = 10000^(-2/8) = 0.1
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(r.f32()[5 * 8 + c], r.f32()[3 * 8 + c]) << c;  // clamped rows
}

// The original's empty start + a memory holding every earlier token: segment-wise = one long forward.
void check_long_forward(int64_t clamp) {
  TransformerXLConfig c = small(24);
  c.xl_original = true;
  c.clamp_len = clamp;
  TransformerXL model(c);
  model.init(7);
  const Tensor src = random_tokens(2, 24, 11);
  autograd::NoGradGuard no_grad;
  TransformerXLConfig c0 = c;
  c0.mem_len = 0;
  TransformerXL whole(c0);
  copy_params(model, whole);
  const Tensor full = whole.features(src, {}).value();  // [2, 24, C]
  auto state = model.new_segment_state(SegmentUse::Training);
  for (int64_t k = 0; k < 3; ++k) {
    const Tensor seg = model.features(columns(src, 8 * k, 8), {.state = state.get()}).value();
    EXPECT_LT(max_rel_diff(seg, full, 8 * k), 1e-4) << "segment " << k << " clamp " << clamp;
  }
  EXPECT_EQ(state->kept(), 24);
  // With a memory of 4 rows the third segment no longer sees the first: the truncation is real.
  TransformerXLConfig c4 = c;
  c4.mem_len = 4;
  TransformerXL short_mem(c4);
  copy_params(model, short_mem);
  auto s4 = short_mem.new_segment_state(SegmentUse::Training);
  Tensor seg;
  for (int64_t k = 0; k < 3; ++k) seg = short_mem.features(columns(src, 8 * k, 8), {.state = s4.get()}).value();
  EXPECT_GT(max_rel_diff(seg, full, 16), 1e-3);
}

TEST(TransformerXL, MemoryEqualsOneLongForward) { check_long_forward(-1); }
TEST(TransformerXL, MemoryEqualsOneLongForwardClamped) { check_long_forward(5); }

TEST(TransformerXL, HfZeroStartAndOriginalEmptyStart) {
  TransformerXL hf(small(6));
  hf.init(3);
  const Tensor src = random_tokens(2, 5, 4);
  autograd::NoGradGuard no_grad;
  auto state = hf.new_segment_state(SegmentUse::Training);
  const Tensor with_state = hf.features(src, {.state = state.get()}).value();
  EXPECT_EQ(state->kept(), 6);  // zeros [6] + 5 tokens, the last 6 rows kept
  // A call without a state starts from zeros too (HF's init_mems when mems is None).
  const Tensor stateless = hf.features(src, {}).value();
  EXPECT_EQ(std::memcmp(with_state.bytes(), stateless.bytes(), with_state.nbytes()), 0);
  // The zero memory is attended: without memory the first segment differs.
  TransformerXLConfig c0 = small(0);
  TransformerXL none(c0);
  copy_params(hf, none);
  EXPECT_GT(max_rel_diff(none.features(src, {}).value(), with_state, 0), 1e-3);
  // The original: the first segment sees no memory at all.
  TransformerXLConfig co = small(6);
  co.xl_original = true;
  TransformerXL orig(co);
  TransformerXLConfig cs0 = c0;  // xl_original shares (u, v): the same parameter list as untie_r = false
  cs0.untie_r = false;
  TransformerXL shared0(cs0);
  orig.init(3);
  copy_params(orig, shared0);
  auto so = orig.new_segment_state(SegmentUse::Training);
  const Tensor first = orig.features(src, {.state = so.get()}).value();
  EXPECT_EQ(so->kept(), 5);
  EXPECT_LT(max_rel_diff(first, shared0.features(src, {}).value(), 0), 1e-6);
}

TEST(TransformerXL, SegmentStateSaveLoadIsExact) {
  TransformerXLConfig c = small(6);
  c.same_length = true;
  c.clamp_len = 4;
  TransformerXL model(c);
  model.init(5);
  autograd::NoGradGuard no_grad;
  auto a = model.new_segment_state(SegmentUse::Training);
  for (uint64_t k = 0; k < 2; ++k) (void)model.features(random_tokens(2, 5, 20 + k), {.state = a.get()});
  auto b = model.new_segment_state(SegmentUse::Training);
  b->load(a->save());
  EXPECT_EQ(b->kept(), 6);
  EXPECT_EQ(b->position(), a->position());
  const Tensor src = random_tokens(2, 5, 30);
  const Tensor x = model.features(src, {.state = a.get()}).value();
  const Tensor y = model.features(src, {.state = b.get()}).value();
  EXPECT_EQ(std::memcmp(x.bytes(), y.bytes(), x.nbytes()), 0);
  // A different batch size is a usage error naming --mem-len.
  EXPECT_THROW((void)model.features(random_tokens(3, 5, 1), {.state = a.get()}), Error);
  // No --kv-cache for this family: a usage error, not a crash (generation has its own state, below).
  EXPECT_THROW((void)model.new_segment_state(SegmentUse::Memory), Error);
  EXPECT_EQ(TransformerXL(small(0)).new_segment_state(SegmentUse::Training), nullptr);
}

// Generation's state (SegmentUse::Decode). mem_len 0: every earlier token is kept, so a context
// then one token per call gives, at every step, the last row of ONE forward over the whole
// sequence (what HF's generate computes at mem_len 0, re-running it); mem_len 4 with HF's zero
// start: the state holds exactly 4 rows after every call, and a step sees the last 4 layer inputs
// (= a Training memory fed the same calls; the HF equality itself is check_xl_generate.py's).
TEST(TransformerXL, DecodeStateIsTheMemory) {
  autograd::NoGradGuard no_grad;
  TransformerXL full(small(0));
  full.init(9);
  const Tensor seq = random_tokens(1, 12, 40);
  const Tensor one = full.features(seq, {}).value();  // [1, 12, C]
  auto state = full.new_segment_state(SegmentUse::Decode);
  ASSERT_NE(state, nullptr);
  const Tensor ctx = full.features(columns(seq, 0, 5), {.state = state.get()}).value();
  EXPECT_LE(max_rel_diff(ctx, one, 0), 1e-5);
  for (int64_t t = 5; t < 12; ++t) {
    const Tensor step = full.features(columns(seq, t, 1), {.state = state.get()}).value();  // [1, 1, C]
    EXPECT_LE(max_rel_diff(step, one, t), 1e-5) << "token " << t;
  }
  EXPECT_EQ(state->kept(), 12);
  EXPECT_EQ(state->position(), 12);

  TransformerXL mem(small(4));
  mem.init(9);
  auto decode = mem.new_segment_state(SegmentUse::Decode), train = mem.new_segment_state(SegmentUse::Training);
  Tensor a = mem.features(columns(seq, 0, 5), {.state = decode.get()}).value();
  Tensor b = mem.features(columns(seq, 0, 5), {.state = train.get()}).value();
  EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.nbytes()), 0);
  for (int64_t t = 5; t < 12; ++t) {
    a = mem.features(columns(seq, t, 1), {.state = decode.get()}).value();
    b = mem.features(columns(seq, t, 1), {.state = train.get()}).value();
    EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.nbytes()), 0) << "token " << t;
    EXPECT_EQ(decode->kept(), 4);
  }
  // The memory matters: the last step without it (a fresh zero memory) differs.
  const Tensor alone = mem.features(columns(seq, 11, 1), {}).value();
  EXPECT_GT(max_rel_diff(alone, a, 0), 1e-3);
}

}  // namespace
}  // namespace stretch::models
