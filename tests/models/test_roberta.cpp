// The roberta encoder family (models/roberta/): presets and config errors, fairseq's parameter
// names, bidirectional attention (a later token changes an earlier output), pad keys invisible,
// the masked_lm head's loss against a double log-softmax of its own logits over the masked rows
// only, and the refused segment states. Numerical parity with PyTorch: tests/parity
// (parity_model_roberta).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "models/registry.h"
#include "models/roberta/roberta.h"
#include "testing.h"

namespace stretch::models {
namespace {

using stretch::testing::error_of;
using stretch::testing::param_names;

nlohmann::json tiny(nlohmann::json given = nlohmann::json::object()) {
  given["vocab_size"] = 30;
  given["encoder_embed_dim"] = 16;
  given["encoder_ffn_embed_dim"] = 32;
  given["encoder_attention_heads"] = 2;
  given["dropout"] = 0.0;
  given["attention_dropout"] = 0.0;
  return resolve_config("roberta_tiny", given, 12);
}

Tensor tokens(std::vector<int32_t> ids, int64_t B) {
  const auto T = static_cast<int64_t>(ids.size()) / B;
  Tensor t = Tensor::empty({B, T}, DType::I32);
  std::copy(ids.begin(), ids.end(), t.i32());
  return t;
}

TEST(Roberta, PresetsAndFairseqDefaults) {
  const nlohmann::json base = resolve_config("roberta_base", nlohmann::json::object(), 512);
  EXPECT_EQ(base.at("encoder_layers"), 12);
  EXPECT_EQ(base.at("encoder_embed_dim"), 768);
  EXPECT_EQ(base.at("encoder_attention_heads"), 12);
  EXPECT_EQ(base.at("encoder_ffn_embed_dim"), 3072);
  EXPECT_EQ(base.at("encoder_normalize_before"), false);  // RoBERTa: post-norm
  EXPECT_EQ(base.at("activation_fn"), "gelu");
  EXPECT_EQ(base.at("pos"), "alibi");  // symmetric ALiBi by default
  EXPECT_EQ(base.at("criterion"), "masked_lm");
  EXPECT_EQ(resolve_config("roberta_small", nlohmann::json::object(), 64).at("max_positions"), 64);
  EXPECT_EQ(family_of_arch("roberta_tiny").name, "roberta");
  EXPECT_EQ(family_of_config(base, "x").name, "roberta");
}

TEST(Roberta, BadConfigsNameTheFlag) {
  auto err = [](nlohmann::json g) { return error_of([&] { validate_config(tiny(g)); }); };
  std::string e = error_of([] { tiny({{"pos", "rope"}}); });
  EXPECT_NE(e.find("--pos rope"), std::string::npos) << e;
  e = err({{"pos", "sinusoidal"}, {"alibi_learnable_slopes", true}});
  EXPECT_NE(e.find("--alibi-learnable-slopes"), std::string::npos) << e;
  e = error_of([] {
    nlohmann::json c = tiny();
    c["encoder_attention_heads"] = 3;  // 16 / 3
    validate_config(c);
  });
  EXPECT_NE(e.find("--encoder-attention-heads 3"), std::string::npos) << e;
  e = error_of([] { tiny({{"decoder_layers", 3}}); });
  EXPECT_NE(e.find("unknown model config key 'decoder_layers'"), std::string::npos) << e;
  // The transformer_lm family's ALiBi variants are refused naming their flag and the arch.
  e = error_of([] { tiny({{"alibi_shape", "log"}}); });
  EXPECT_NE(e.find("--alibi-shape (model config key 'alibi_shape'): not supported by --arch roberta_tiny"),
            std::string::npos) << e;
  e = error_of([] { tiny({{"pos_upper", "rope"}}); });
  EXPECT_NE(e.find("--pos-upper"), std::string::npos) << e;
  e = err({{"alibi_slope_scale", 0.0}});
  EXPECT_NE(e.find("alibi_slope_scale"), std::string::npos) << e;
  e = error_of([] { tiny({{"criterion", "cross_entropy"}}); });
  EXPECT_NE(e.find("--criterion cross_entropy"), std::string::npos) << e;
  // The shared --criterion flag accepts masked_lm (the choices of every family).
  bool found = false;
  for (const auto& f : model_fields())
    if (f.key == "criterion") {
      found = std::find(f.choices.begin(), f.choices.end(), "masked_lm") != f.choices.end();
      EXPECT_NE(std::find(f.choices.begin(), f.choices.end(), "adaptive_loss"), f.choices.end());
    }
  EXPECT_TRUE(found);
}

TEST(Roberta, FairseqParameterNames) {
  auto m = build_model(tiny({{"pos", "learned"}}));
  const std::vector<std::string> names = param_names(*m);
  ASSERT_GE(names.size(), 8u);
  EXPECT_EQ(names[0], "encoder.sentence_encoder.embed_tokens.weight");
  EXPECT_EQ(names[1], "encoder.sentence_encoder.embed_positions.weight");
  EXPECT_EQ(names[2], "encoder.sentence_encoder.layernorm_embedding.weight");
  EXPECT_EQ(names[4], "encoder.sentence_encoder.layers.0.self_attn.k_proj.weight");
  const std::vector<std::string> head(names.end() - 5, names.end());
  EXPECT_EQ(head, (std::vector<std::string>{"encoder.lm_head.bias", "encoder.lm_head.dense.weight",
                                            "encoder.lm_head.dense.bias", "encoder.lm_head.layer_norm.weight",
                                            "encoder.lm_head.layer_norm.bias"}));
  EXPECT_EQ(m->params().get("encoder.sentence_encoder.embed_positions.weight").shape()[0], 12 + 1 + 1);
  auto learn = build_model(tiny({{"alibi_learnable_slopes", true}}));
  EXPECT_EQ(param_names(*learn).back(), "encoder.sentence_encoder.layers.1.self_attn.alibi_slopes");
  learn->init(1);
  const Tensor s = learn->params().get("encoder.sentence_encoder.layers.0.self_attn.alibi_slopes").value();
  EXPECT_FLOAT_EQ(s.f32()[0], 0.0625f);  // 2 heads: 2^-4, 2^-8 (the paper's rule)
  EXPECT_FLOAT_EQ(s.f32()[1], 0.00390625f);
}

// The output at position 0 depends on the token at the last position (no causal mask), for every
// position method; a pad key changes nothing for the other rows' tokens.
TEST(Roberta, AttentionIsBidirectionalAndPadKeysAreInvisible) {
  autograd::NoGradGuard no_grad;
  for (const char* pos : {"alibi", "sinusoidal", "learned", "none"}) {
    auto m = build_model(tiny({{"pos", pos}}));
    m->init(3);
    const Tensor a = m->features(tokens({5, 6, 7, 8, 9}, 1), {}).value();
    const Tensor b = m->features(tokens({5, 6, 7, 8, 20}, 1), {}).value();
    EXPECT_GT(std::abs(a.f32()[0] - b.f32()[0]) + std::abs(a.f32()[1] - b.f32()[1]), 1e-6f) << pos;
    const Tensor padded = m->features(tokens({5, 6, 7, 1, 1}, 1), {}).value();
    const Tensor shorter = m->features(tokens({5, 6, 7}, 1), {}).value();
    for (int64_t i = 0; i < 3 * 16; ++i) EXPECT_NEAR(padded.f32()[i], shorter.f32()[i], 1e-5f) << pos << " " << i;
  }
}

// Position interpolation for the symmetric bias: alibi_slope_scale 0.5 (what eval-lm --task
// masked_lm --alibi-interpolate sets at 2 L_train) computes what a model whose (learnable) slopes
// are set to the rule's halves computes (2 heads: 2^-4, 2^-8 -> 2^-5, 2^-9), and differs from 1.
TEST(Roberta, InterpolationScaleEqualsHalvedSlopes) {
  autograd::NoGradGuard no_grad;
  auto scaled = build_model(tiny({{"alibi_slope_scale", 0.5}}));
  auto halved = build_model(tiny({{"alibi_learnable_slopes", true}}));
  auto plain = build_model(tiny());
  for (auto* m : {scaled.get(), halved.get(), plain.get()}) m->init(4);
  int set = 0;
  for (auto& [name, var] : halved->params().items())
    if (name.find("alibi_slopes") != std::string::npos) {
      ASSERT_EQ(var.numel(), 2);
      var.data()[0] = 0.03125f, var.data()[1] = 0.001953125f, ++set;
    }
  ASSERT_EQ(set, 2);  // one [H] per layer
  const Tensor src = tokens({5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 1);
  const Tensor a = scaled->features(src, {.mode = Mode::Eval}).value();
  const Tensor b = halved->features(src, {.mode = Mode::Eval}).value();
  const Tensor c = plain->features(src, {.mode = Mode::Eval}).value();
  double diff = 0, plain_diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a.f32()[i] - b.f32()[i])));
    plain_diff = std::max(plain_diff, static_cast<double>(std::fabs(a.f32()[i] - c.f32()[i])));
  }
  EXPECT_LE(diff, 1e-5);
  EXPECT_GT(plain_diff, 1e-4);
}

// loss() scores the rows whose target is not pad, and only those: the summed −log softmax of the
// head's own full logits (log_scores) at those rows, computed here in double; sample_size = their count.
TEST(Roberta, MaskedLmLossIsTheNllOfTheMaskedRowsOnly) {
  auto m = build_model(tiny());
  m->init(5);
  const Tensor src = tokens({5, 29, 7, 8, 29, 10, 11, 12, 13, 29, 15, 1}, 2);
  const Tensor tgt = tokens({1, 6, 1, 1, 9, 1, 1, 1, 1, 14, 1, 1}, 2);
  Tensor logits;
  double expected = 0;
  {
    autograd::NoGradGuard no_grad;
    const Tensor h = m->features(src, {}).value();  // [2, 6, 16]
    logits = m->head().log_scores(h);               // [2, 6, 30]
    for (int64_t i = 0; i < 12; ++i) {
      if (tgt.i32()[i] == 1) continue;
      double mx = -1e30, sum = 0;
      for (int v = 0; v < 30; ++v) mx = std::max(mx, static_cast<double>(logits.f32()[i * 30 + v]));
      for (int v = 0; v < 30; ++v) sum += std::exp(logits.f32()[i * 30 + v] - mx);
      expected += mx + std::log(sum) - logits.f32()[i * 30 + tgt.i32()[i]];
    }
    const nn::HeadLoss l = m->head().loss(m->features(src, {}), tgt, 1, nn::LossUse::Validation);
    EXPECT_EQ(l.ntokens, 3);
    EXPECT_EQ(l.sample_size, 3.0);
    EXPECT_NEAR(l.loss.value().f32()[0], expected, 1e-4 * expected);
    // target_nll over chosen rows gives the same per-row numbers.
    std::vector<int64_t> rows = {1, 4, 9};
    std::vector<int32_t> t = {6, 9, 14};
    std::vector<float> nll(3);
    m->head().target_nll(h, rows, t, nll.data(), 2);
    EXPECT_NEAR(nll[0] + nll[1] + nll[2], expected, 1e-4 * expected);
  }
  // No masked token: loss 0 and sample size 0 (fairseq's masked_lm scores nothing).
  autograd::NoGradGuard no_grad;
  const nn::HeadLoss none = m->head().loss(m->features(src, {}), tokens(std::vector<int32_t>(12, 1), 2), 1,
                                           nn::LossUse::Validation);
  EXPECT_EQ(none.ntokens, 0);
  EXPECT_EQ(none.loss.value().f32()[0], 0.f);
}

TEST(Roberta, NoKvCacheOrMemory) {
  auto m = build_model(tiny());
  EXPECT_EQ(m->new_segment_state(SegmentUse::Training), nullptr);
  const std::string e = error_of([&] { m->new_segment_state(SegmentUse::Decode); });
  EXPECT_NE(e.find("bidirectional"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { m->new_segment_state(SegmentUse::Memory); }).find("--kv-cache"), std::string::npos);
}

TEST(Roberta, LearnedPositionsRefuseLongerBlocks) {
  auto m = build_model(tiny({{"pos", "learned"}}));
  m->init(1);
  autograd::NoGradGuard no_grad;
  const std::string e = error_of([&] { m->features(tokens(std::vector<int32_t>(13, 5), 1), {}); });
  EXPECT_NE(e.find("max_positions = 12"), std::string::npos) << e;
}

}  // namespace
}  // namespace stretch::models
