// Adaptive input + adaptive softmax (issue 12): the wiki103 preset's parameter count (REFERENCE.md
// §2.1: 246,933,504 at V = 267,744), the count formula against the built model, fairseq's
// parameter names, the head's three views of one distribution (loss, target_nll, log_scores), the
// adaptive_loss quirk, the pad row through the tied head, and the config checks. PyTorch parity
// of logits, loss and gradients: tests/parity (parity_model_adaptive).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"
#include "core/rng.h"
#include "models/registry.h"
#include "models/transformer_lm/transformer_lm.h"
#include "testing.h"

namespace stretch::models {
namespace {

using stretch::testing::error_of;

// V 40, bands [0,10) [10,25) [25,40), factor 2: d = 16, 8, 4.
TransformerLMConfig small(bool tie, bool tie_proj, Criterion crit = Criterion::AdaptiveLoss) {
  TransformerLMConfig c = preset("transformer_lm_tiny");
  c.vocab_size = 40;
  c.decoder_layers = 1;
  c.decoder_embed_dim = 16;
  c.decoder_ffn_embed_dim = 32;
  c.decoder_attention_heads = 2;
  c.dropout = 0.f;
  c.adaptive_input = true;
  c.adaptive_input_cutoff = "10,25";
  c.adaptive_softmax_cutoff = "10,25";
  c.adaptive_input_factor = c.adaptive_softmax_factor = 2.f;
  c.tie_adaptive_weights = tie;
  c.tie_adaptive_proj = tie_proj;
  c.criterion = crit;
  return c;
}

std::vector<std::string> names(const TransformerLM& m) { return stretch::testing::param_names(m); }

TEST(Adaptive, Wiki103PresetHasThePapersParameterCount) {
  TransformerLMConfig c = preset("transformer_lm_wiki103");
  c.vocab_size = 267744;
  EXPECT_EQ(TransformerLM::parameter_count(c), 246933504);  // REFERENCE.md §2.1, fairseq's README
  EXPECT_TRUE(c.adaptive_input && c.tie_adaptive_weights && c.tie_adaptive_proj);
  EXPECT_EQ(c.adaptive_softmax_cutoff, "20000,60000");
  EXPECT_FLOAT_EQ(c.adaptive_softmax_dropout, 0.2f);
  const TransformerLMConfig b = preset("transformer_lm_baevski_wiki103");
  EXPECT_EQ(b.to_json().dump(), [] {
    TransformerLMConfig w = preset("transformer_lm_wiki103");
    w.arch = "transformer_lm_baevski_wiki103";
    return w.to_json().dump();
  }());
}

TEST(Adaptive, ParameterCountMatchesTheBuiltModel) {
  std::vector<TransformerLMConfig> cs = {small(true, true), small(true, false), small(false, false)};
  TransformerLMConfig only_softmax = small(false, false);
  only_softmax.adaptive_input = false;
  only_softmax.adaptive_softmax_factor = 4.f;
  cs.push_back(only_softmax);
  TransformerLMConfig only_input = small(false, false);
  only_input.adaptive_softmax_cutoff = "";
  only_input.criterion = Criterion::CrossEntropy;
  cs.push_back(only_input);
  TransformerLMConfig wiki_shape = preset("transformer_lm_wiki103");  // the real layout, small V and C
  wiki_shape.vocab_size = 70000;
  wiki_shape.decoder_layers = 1;
  wiki_shape.decoder_embed_dim = 64;
  wiki_shape.decoder_ffn_embed_dim = 32;
  cs.push_back(wiki_shape);
  for (const auto& c : cs) {
    TransformerLM m(c);
    EXPECT_EQ(TransformerLM::parameter_count(c), m.params().numel()) << c.to_json().dump();
  }
}

TEST(Adaptive, ParametersCarryFairseqNames) {
  const std::vector<std::string> tied = names(TransformerLM(small(true, true)));
  const std::vector<std::string> head = {tied.begin(), tied.begin() + 6};
  EXPECT_EQ(head, (std::vector<std::string>{
                      "decoder.embed_tokens.embeddings.0.0.weight", "decoder.embed_tokens.embeddings.0.1.weight",
                      "decoder.embed_tokens.embeddings.1.0.weight", "decoder.embed_tokens.embeddings.1.1.weight",
                      "decoder.embed_tokens.embeddings.2.0.weight", "decoder.embed_tokens.embeddings.2.1.weight"}));
  EXPECT_EQ(tied.back(), "decoder.adaptive_softmax.head.class_proj.weight");  // the only head weight of its own
  const std::vector<std::string> untied = names(TransformerLM(small(false, false)));
  const std::vector<std::string> tail = {untied.end() - 5, untied.end()};
  EXPECT_EQ(tail, (std::vector<std::string>{
                      "decoder.adaptive_softmax.head.weight", "decoder.adaptive_softmax.tail.0.0.weight",
                      "decoder.adaptive_softmax.tail.0.2.weight", "decoder.adaptive_softmax.tail.1.0.weight",
                      "decoder.adaptive_softmax.tail.1.2.weight"}));
  const TransformerLM m(small(false, false));
  EXPECT_EQ(m.params().get("decoder.adaptive_softmax.head.weight").shape(), Shape({12, 16}));  // 10 words + 2 clusters
  EXPECT_EQ(m.params().get("decoder.adaptive_softmax.tail.1.0.weight").shape(), Shape({4, 16}));
  EXPECT_EQ(m.params().get("decoder.adaptive_softmax.tail.1.2.weight").shape(), Shape({15, 4}));
  const std::vector<std::string> proj_untied = names(TransformerLM(small(true, false)));
  EXPECT_EQ(proj_untied.back(), "decoder.adaptive_softmax.tail.1.0.weight");
}

struct Batch {
  Tensor src, tgt;
};
Batch batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Rng rng(seed, 3);
  Batch b{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32)};
  for (int64_t i = 0; i < B * T; ++i) {
    b.src.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(V - 4)));
    b.tgt.i32()[i] = 4 + static_cast<int32_t>(rng.below(static_cast<uint64_t>(V - 4)));
  }
  // Every band, the tail-local pad index of both tails (global 11 and 26) and a pad target.
  const int32_t fixed[] = {5, 11, 26, 12, 30, 1};
  for (int i = 0; i < 6; ++i) b.tgt.i32()[i] = fixed[i];
  return b;
}

// loss(Validation), target_nll and log_scores are one distribution: the exact NLL from the full
// log-probabilities equals target_nll, cross_entropy's loss equals Σ target_nll, adaptive_loss's
// loss drops exactly the within-cluster term of the tail-local pad targets.
TEST(Adaptive, LossTargetNllAndLogScoresAgree) {
  for (bool tie : {false, true}) {
    TransformerLM m(small(tie, tie));
    m.init(7);
    const Batch b = batch(2, 9, 40, 11);
    autograd::NoGradGuard no_grad;
    const Tensor h = m.features(b.src, {}).value();  // [2, 9, 16]
    const Tensor lp = m.head().log_scores(h);          // [2, 9, 40]
    ASSERT_EQ(lp.shape(), Shape({2, 9, 40}));
    std::vector<int64_t> rows;
    std::vector<int32_t> tg;
    for (int64_t i = 0; i < 18; ++i)
      if (b.tgt.i32()[i] != 1) rows.push_back(i), tg.push_back(b.tgt.i32()[i]);
    std::vector<float> nll(rows.size());
    m.head().target_nll(h, rows, tg, nll.data(), /*chunk_rows=*/4);
    for (int64_t chunk : {0, 1, 3}) {  // the chunking (head chunks, tail sub-chunks) changes nothing
      std::vector<float> again(rows.size());
      m.head().target_nll(h, rows, tg, again.data(), chunk);
      for (size_t j = 0; j < rows.size(); ++j) EXPECT_NEAR(again[j], nll[j], 1e-6 * std::max(1.0f, std::abs(nll[j])))
                                                     << "chunk " << chunk << " row " << j;
    }
    double exact = 0, quirk = 0;
    for (size_t j = 0; j < rows.size(); ++j) {
      const float* row = lp.f32() + rows[j] * 40;
      double z = 0;
      for (int v = 0; v < 40; ++v) z += std::exp(static_cast<double>(row[v]));
      EXPECT_NEAR(z, 1.0, 1e-5) << "row " << rows[j];
      EXPECT_NEAR(nll[j], -row[tg[j]], 1e-5) << "target " << tg[j];
      exact += nll[j];
      if (tg[j] == 11 || tg[j] == 26) {  // the within-cluster term −log p(w | cluster)
        const int s = tg[j] == 11 ? 10 : 25, e = tg[j] == 11 ? 25 : 40;
        double p_cluster = 0;  // Σ of p(v) over the band's words
        for (int v = s; v < e; ++v) p_cluster += std::exp(static_cast<double>(row[v]));
        quirk += -row[tg[j]] + std::log(p_cluster);
      }
    }
    EXPECT_GT(quirk, 0);
    TransformerLM ce(small(tie, tie, Criterion::CrossEntropy));
    for (size_t i = 0; i < m.params().items().size(); ++i)
      ce.params().items()[i].second.value().copy_from(m.params().items()[i].second.value());
    const Tensor hce = ce.features(b.src, {}).value();
    const nn::HeadLoss l_ce = ce.head().loss(Var(hce), b.tgt, 1, nn::LossUse::Validation);
    const nn::HeadLoss l_ad = m.head().loss(Var(h), b.tgt, 1, nn::LossUse::Validation);
    EXPECT_EQ(l_ce.ntokens, 17);
    EXPECT_EQ(l_ad.ntokens, 17);
    EXPECT_EQ(l_ad.sample_size, 17.0);
    EXPECT_NEAR(l_ce.loss.value().f32()[0], exact, 1e-4 * exact);
    EXPECT_NEAR(l_ad.loss.value().f32()[0], exact - quirk, 1e-4 * exact);
  }
}

// With tied tables the head's softmax trains band 0's pad row (fairseq does too); the input side
// never does (band 0's embedding has padding_idx).
TEST(Adaptive, PadRowTrainsOnlyThroughTheTiedHead) {
  for (bool tie : {false, true}) {
    TransformerLM m(small(tie, tie));
    m.init(3);
    Batch b = batch(2, 9, 40, 5);
    for (int64_t i = 0; i < 18; i += 4) b.src.i32()[i] = 1;  // pad inputs
    m.params().zero_grad();
    Var h = m.features(b.src, {.mode = Mode::Train});
    autograd::tape().backward(m.head().loss(h, b.tgt, 1, nn::LossUse::Training).loss);
    const Var& table0 = m.params().get("decoder.embed_tokens.embeddings.0.0.weight");
    double pad_grad = 0, other = 0;
    for (int c = 0; c < 16; ++c) pad_grad += std::abs(table0.grad().f32()[1 * 16 + c]);
    for (int c = 0; c < 16; ++c) other += std::abs(table0.grad().f32()[5 * 16 + c]);
    EXPECT_GT(other, 0) << "tie=" << tie;
    if (tie) EXPECT_GT(pad_grad, 0) << "the tied head trains the pad row";
    else EXPECT_EQ(pad_grad, 0) << "the input side never trains the pad row";
  }
}

TEST(Adaptive, InitZeroesThePadRowOfEveryBand) {
  TransformerLM m(small(false, false));
  m.init(9);
  for (int band = 0; band < 3; ++band) {
    const Var& t = m.params().get("decoder.embed_tokens.embeddings." + std::to_string(band) + ".0.weight");
    const int64_t d = t.shape()[1];
    double row1 = 0, row2 = 0;
    for (int64_t c = 0; c < d; ++c) row1 += std::abs(t.value().f32()[d + c]), row2 += std::abs(t.value().f32()[2 * d + c]);
    EXPECT_EQ(row1, 0) << "band " << band;
    EXPECT_GT(row2, 0) << "band " << band;
  }
}

TEST(Adaptive, BadConfigsAreUsageErrorsNamingTheFlag) {
  auto err = [](auto edit) {
    TransformerLMConfig c = small(true, true);
    edit(c);
    return error_of([&] { c.validate(); });
  };
  EXPECT_NE(err([](auto& c) { c.adaptive_input_cutoff = c.adaptive_softmax_cutoff = "25,10"; })
                .find("--adaptive-input-cutoff '25,10' (model config key 'adaptive_input_cutoff'): cutoffs must be strictly increasing"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_softmax_cutoff = "10,50"; }).find("--adaptive-softmax-cutoff '10,50'"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_softmax_cutoff = "10,x"; }).find("'x' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_softmax_cutoff = "10,20"; })
                .find("--tie-adaptive-weights: --adaptive-input-cutoff '10,25' and --adaptive-softmax-cutoff '10,20' differ"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_softmax_factor = 4.f; }).find("--adaptive-input-factor 2 and --adaptive-softmax-factor 4 differ"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_input_factor = c.adaptive_softmax_factor = 0.f; }).find("--adaptive-input-factor 0"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_input_factor = c.adaptive_softmax_factor = 8.f; }).find("is below 1"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_input = false; }).find("--tie-adaptive-weights needs --adaptive-input"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_input_cutoff = ""; }).find("--adaptive-input needs --adaptive-input-cutoff"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_input_cutoff = c.adaptive_softmax_cutoff = "1,20"; }).find("must exceed the padding index"),
            std::string::npos);
  EXPECT_NE(err([](auto& c) { c.adaptive_softmax_dropout = 1.f; }).find("--adaptive-softmax-dropout 1"), std::string::npos);
  EXPECT_NE(err([](auto& c) {
              c.tie_adaptive_weights = c.tie_adaptive_proj = false;
              c.adaptive_softmax_cutoff = "";
            }).find("--criterion adaptive_loss needs an adaptive softmax"),
            std::string::npos);
  // The preset at a small dictionary (PTB's 10k words) says what to do.
  TransformerLMConfig w = preset("transformer_lm_wiki103");
  w.vocab_size = 10008;
  EXPECT_NE(error_of([&] { w.validate(); }).find("cutoff 20000 exceeds the vocabulary size 10008"), std::string::npos);
}

}  // namespace
}  // namespace stretch::models
