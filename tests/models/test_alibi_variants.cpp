// The ALiBi variants of issue 15 (models/transformer_lm/alibi_variants.h): the slopes each layer
// gets (expected values written out by hand from the contract, not from the code), the slope
// warm-up as a pure function of the update number, bad input as one error naming the flag, the
// config round trip (the variant is saved in the model config), the learnable slopes' names and
// their after-step clamp. Numerics against PyTorch: tests/parity (parity_model_alibi_variants).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "models/registry.h"
#include "models/transformer_lm/alibi_variants.h"
#include "models/transformer_lm/transformer_lm.h"
#include "testing.h"

namespace stretch::models {
namespace {

using stretch::testing::error_of;

TransformerLMConfig cfg(int64_t layers, int64_t heads, nlohmann::json given = nlohmann::json::object()) {
  given["vocab_size"] = 24;
  given["decoder_layers"] = layers;
  given["decoder_embed_dim"] = 8 * heads;
  given["decoder_ffn_embed_dim"] = 16;
  given["decoder_attention_heads"] = heads;
  return TransformerLMConfig::from_json(resolve_config("transformer_lm_tiny", given, 32));
}

std::string validate_error(const nlohmann::json& given, int64_t layers = 2, int64_t heads = 4) {
  return error_of([&] { cfg(layers, heads, given).validate(); });
}

TEST(AlibiVariants, DefaultIsThePaperRuleInEveryLayer) {
  const auto s = alibi_layer_slopes(cfg(2, 4));
  ASSERT_EQ(s.size(), 2u);
  for (const auto& row : s) {  // 4 heads: 2^-2, 2^-4, 2^-6, 2^-8
    ASSERT_EQ(row.size(), 4u);
    EXPECT_EQ(row[0], 0.25f);
    EXPECT_EQ(row[1], 0.0625f);
    EXPECT_EQ(row[2], 0.015625f);
    EXPECT_EQ(row[3], 0.00390625f);
  }
}

TEST(AlibiVariants, ExplicitListGroupsLayerScaleAndNoBiasHeads) {
  // The blog's 1/2^i for 4 heads (the paper's rule gives 1/4, 1/16, ... for 4 heads).
  auto s = alibi_layer_slopes(cfg(2, 4, {{"alibi_slopes", "0.5, 0.25,0.125,0.0625"}}));
  EXPECT_EQ(s[1], (std::vector<float>{0.5f, 0.25f, 0.125f, 0.0625f}));
  // Seed 002 §5.3: 2 text heads (rule for 2 heads: 1/16, 1/256) and 2 image heads x 0.5.
  s = alibi_layer_slopes(cfg(1, 4, {{"alibi_slope_groups", "2:1,2:0.5"}}));
  EXPECT_EQ(s[0], (std::vector<float>{0.0625f, 0.00390625f, 0.03125f, 0.001953125f}));
  // linear:0.25 over 3 layers: factors 1, 0.625, 0.25.
  s = alibi_layer_slopes(cfg(3, 2, {{"alibi_layer_scale", "linear:0.25"}}));
  EXPECT_EQ(s[0], (std::vector<float>{0.0625f, 0.00390625f}));
  EXPECT_EQ(s[1], (std::vector<float>{0.0390625f, 0.00244140625f}));
  EXPECT_EQ(s[2], (std::vector<float>{0.015625f, 0.0009765625f}));
  s = alibi_layer_slopes(cfg(2, 2, {{"alibi_layer_scale", "2,0.5"}, {"alibi_no_bias_heads", "1:0"}}));
  EXPECT_EQ(s[0], (std::vector<float>{0.125f, 0.0078125f}));
  EXPECT_EQ(s[1], (std::vector<float>{0.f, 0.001953125f}));
  // Hybrid: layers from K = 1 carry no ALiBi slopes.
  s = alibi_layer_slopes(cfg(3, 2, {{"pos_upper", "rope"}, {"pos_upper_from_layer", 1}}));
  EXPECT_EQ(s[0].size(), 2u);
  EXPECT_TRUE(s[1].empty() && s[2].empty());
}

TEST(AlibiVariants, WarmupIsAPureFunctionOfTheUpdate) {
  const auto c = cfg(2, 4, {{"alibi_slope_warmup_updates", 10}, {"alibi_slope_warmup_init", 0.2}});
  EXPECT_FLOAT_EQ(alibi_warmup_factor(c, 0), 0.2f);
  EXPECT_FLOAT_EQ(alibi_warmup_factor(c, 5), 0.6f);
  EXPECT_FLOAT_EQ(alibi_warmup_factor(c, 10), 1.0f);
  EXPECT_FLOAT_EQ(alibi_warmup_factor(c, 1000), 1.0f);
  EXPECT_FLOAT_EQ(alibi_warmup_factor(cfg(2, 4), 0), 1.0f);  // off by default
}

TEST(AlibiVariants, WarmupShapesTrainingOnlyAndEvaluationSeesTheTargetSlopes) {
  TransformerLMConfig c = cfg(1, 2, {{"dropout", 0.0}, {"alibi_slope_warmup_updates", 4}, {"alibi_slope_warmup_init", 0.25}});
  TransformerLM m(c);
  m.init(3);
  TransformerLM plain(cfg(1, 2, {{"dropout", 0.0}}));
  plain.init(3);
  Tensor src = Tensor::empty({1, 12}, DType::I32);
  for (int i = 0; i < 12; ++i) src.i32()[i] = 4 + (i * 7) % 19;
  autograd::NoGradGuard no_grad;
  auto row = [&](TransformerLM& model, Mode mode, uint64_t step) {
    Var h = model.features(src, {.mode = mode, .step = step});
    return std::vector<float>(h.data(), h.data() + h.numel());
  };
  EXPECT_EQ(row(m, Mode::Eval, 0), row(plain, Mode::Eval, 0));    // evaluation: w = 1
  EXPECT_EQ(row(m, Mode::Train, 4), row(plain, Mode::Train, 4));  // warm-up over: w = 1
  EXPECT_NE(row(m, Mode::Train, 1), row(plain, Mode::Train, 1));  // w = 0.4375
  EXPECT_EQ(row(m, Mode::Train, 1), row(m, Mode::Train, 1));      // a pure function of the update
}

TEST(AlibiVariants, BadInputNamesTheFlag) {
  EXPECT_NE(validate_error({{"alibi_slopes", "0.5,0.25"}}).find("--alibi-slopes '0.5,0.25'"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slopes", "0.5,0.25"}}).find("2 slopes for 4 heads"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slopes", "0.5,x,1,1"}}).find("'x' is not a finite number"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slopes", "0.5,-1,1,1"}}).find(">= 0"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slope_groups", "2:1,1:0.5"}}).find("cover 3 heads, the model has 4"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slope_groups", "2:1,2:0"}}).find("--alibi-slope-groups"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slope_groups", "4"}, {"alibi_slopes", "1,1,1,1"}}).find("give one of them"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_layer_scale", "1,2,3"}}).find("3 factors for 2 layers"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_layer_scale", "linear:0"}}).find("--alibi-layer-scale"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_no_bias_heads", "2:0"}}).find("--alibi-no-bias-heads"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_no_bias_heads", "0:1,0:1"}}).find("given twice"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_no_bias_heads", "0-1"}}).find("is not layer:head"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_no_bias_heads", "0:1"}, {"alibi_learnable_slopes", true}})
                .find("--alibi-no-bias-heads with --alibi-learnable-slopes"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_positive_slopes", true}}).find("add --alibi-learnable-slopes"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_shape", "cubic"}}).find("--alibi-shape: unknown bias shape 'cubic'"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_shape", "clipped"}}).find("--alibi-clip-distance 0"), std::string::npos);
  EXPECT_NE(validate_error({{"alibi_clip_distance", 8}}).find("applies to --alibi-shape clipped only"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slope_warmup_updates", 10}, {"alibi_slope_warmup_init", 0.0}})
                .find("--alibi-slope-warmup-init"),
            std::string::npos);
  EXPECT_NE(validate_error({{"alibi_slope_warmup_updates", -1}}).find("--alibi-slope-warmup-updates -1"),
            std::string::npos);
  EXPECT_NE(validate_error({{"pos_upper", "rope"}, {"pos_upper_from_layer", 2}}).find("--pos-upper-from-layer 2"),
            std::string::npos);
  EXPECT_NE(validate_error({{"pos_upper", "rope"}}).find("1 <= K < --decoder-layers"), std::string::npos);
  EXPECT_NE(validate_error({{"pos_upper", "learned"}}).find("--pos-upper: unknown position method 'learned'"),
            std::string::npos);
  EXPECT_NE(validate_error({{"pos", "rope"}, {"alibi_shape", "log"}}).find("--alibi-shape is an ALiBi variant"),
            std::string::npos);
  EXPECT_EQ(validate_error({{"alibi_shape", "clipped"}, {"alibi_clip_distance", 16}}), "(no error)");
}

TEST(AlibiVariants, SavedInTheModelConfig) {
  const nlohmann::json given = {{"alibi_slope_groups", "2:1,2:0.5"},
                                {"alibi_layer_scale", "linear:0.5"},
                                {"alibi_learnable_slopes", true},
                                {"alibi_positive_slopes", true},
                                {"alibi_shape", "clipped"},
                                {"alibi_clip_distance", 12},
                                {"alibi_slope_warmup_updates", 100},
                                {"alibi_slope_warmup_init", 0.5},
                                {"decoder_layers", 3},
                                {"pos_upper", "t5"},
                                {"pos_upper_from_layer", 2}};
  const TransformerLMConfig c = cfg(3, 4, given);
  const nlohmann::json j = c.to_json();
  for (auto it = given.begin(); it != given.end(); ++it) EXPECT_EQ(j.at(it.key()), it.value()) << it.key();
  const TransformerLMConfig back = TransformerLMConfig::from_json(j);
  EXPECT_EQ(structural_differences(c, back), "");
  TransformerLMConfig other = back;
  other.alibi_shape = ops::AlibiShape::Log;
  EXPECT_NE(structural_differences(c, other).find("alibi_shape"), std::string::npos);  // a resume must agree
}

TEST(AlibiVariants, LearnableSlopesAreNamedParametersClampedAfterEachStep) {
  TransformerLM m(cfg(3, 2, {{"alibi_learnable_slopes", true}, {"alibi_positive_slopes", true}, {"pos_upper", "t5"},
                             {"pos_upper_from_layer", 2}}));
  m.init(1);
  std::vector<std::string> names;
  for (const auto& [name, var] : m.params().items()) names.push_back(name);
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[names.size() - 2], "decoder.layers.0.self_attn.alibi_slopes");
  EXPECT_EQ(names.back(), "decoder.layers.1.self_attn.alibi_slopes");  // layer 2 uses t5
  Var s0;
  for (const auto& [name, var] : m.params().items())
    if (name == "decoder.layers.0.self_attn.alibi_slopes") s0 = var;
  EXPECT_EQ(s0.data()[0], 0.0625f);  // initialised from the rule
  s0.data()[0] = -0.5f;
  s0.data()[1] = 0.75f;
  m.after_step();
  EXPECT_EQ(s0.data()[0], 0.f);
  EXPECT_EQ(s0.data()[1], 0.75f);
  EXPECT_NE(m.info().summary.find("learnable(>=0)"), std::string::npos);
}

}  // namespace
}  // namespace stretch::models

namespace stretch::models {
namespace {

TEST(AlibiVariants, InterpolationScaleEqualsExplicitlyScaledSlopes) {
  // alibi_slope_scale 0.25 (what --alibi-interpolate sets for L_train / L_eval = 64 / 256) must
  // compute exactly what a model whose slopes are the rule x 0.25 computes (4 heads: 1/16 ...).
  TransformerLM scaled(cfg(2, 4, {{"dropout", 0.0}, {"alibi_slope_scale", 0.25}}));
  TransformerLM listed(cfg(2, 4, {{"dropout", 0.0}, {"alibi_slopes", "0.0625,0.015625,0.00390625,0.0009765625"}}));
  TransformerLM plain(cfg(2, 4, {{"dropout", 0.0}}));
  for (TransformerLM* m : {&scaled, &listed, &plain}) m->init(5);
  Tensor src = Tensor::empty({2, 20}, DType::I32);
  for (int i = 0; i < 40; ++i) src.i32()[i] = 4 + (i * 11) % 19;
  autograd::NoGradGuard no_grad;
  auto out = [&](TransformerLM& m) {
    Var h = m.features(src, {.mode = Mode::Eval});
    return std::vector<float>(h.data(), h.data() + h.numel());
  };
  const auto a = out(scaled), b = out(listed), c = out(plain);
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_plain = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
    max_plain = std::max(max_plain, static_cast<double>(std::fabs(a[i] - c[i])));
  }
  EXPECT_LE(max_diff, 1e-5);   // same function (m·0.25 in the kernel vs. 0.25·m in the list: rounding only)
  EXPECT_GT(max_plain, 1e-3);  // and the scale does change the function
}

}  // namespace
}  // namespace stretch::models
