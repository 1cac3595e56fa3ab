// NormFormer in transformer_lm (fairseq's --scale-heads / --scale-attn / --scale-fc / --scale-resids,
// nn/decoder_block.h). What is checked here, without an oracle (the values against fairseq are
// tests/fairseq/check_normformer.py, logits and gradients against the float64 PyTorch oracle
// tests/parity's normformer-* cases):
//  * the parameters' names and shapes, and their order: fairseq's named_parameters() lists a layer's
//    own parameters (c_attn, w_resid) before its modules, attn_ln after self_attn, ffn_layernorm before fc1;
//  * TransformerLM::parameter_count = the built model's size for each of the 16 combinations;
//  * init draws nothing: every other parameter is the plain model's for the same seed; c_attn and
//    w_resid start at 1, the LayerNorms at 1 / 0;
//  * at 1 the two scales are the identity (the plain model's features bit for bit);
//  * c_attn scales the D-channel groups of the attention output after out_proj (as fairseq does),
//    so c_attn = (1/2, 2) equals out_proj's rows and bias scaled by them (powers of two: exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "models/registry.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {
namespace {

constexpr int64_t kC = 16, kF = 24, kH = 2;

nlohmann::json config(bool heads, bool attn, bool fc, bool resids, int64_t layers = 2) {
  nlohmann::json given = {{"decoder_layers", layers}, {"decoder_embed_dim", kC}, {"decoder_ffn_embed_dim", kF},
                          {"decoder_attention_heads", kH}, {"dropout", 0.0},   {"scale_heads", heads},
                          {"scale_attn", attn},         {"scale_fc", fc},     {"scale_resids", resids}};
  nlohmann::json c = resolve_config("transformer_lm", given, 8);
  c["vocab_size"] = 40;
  return c;
}

std::unique_ptr<LanguageModel> make(const nlohmann::json& c, uint64_t seed = 3) {
  auto model = build_model(c);
  model->init(seed);
  return model;
}

Tensor tokens() {
  Tensor t = Tensor::empty({2, 8}, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = 4 + static_cast<int32_t>((i * 7) % 30);
  return t;
}

std::vector<float> features(LanguageModel& m) {
  autograd::NoGradGuard no_grad;
  const Tensor y = m.features(tokens(), {}).value();
  return std::vector<float>(y.f32(), y.f32() + y.numel());
}

std::vector<float> values(const Var& v) { return std::vector<float>(v.data(), v.data() + v.numel()); }

TEST(NormFormer, ParameterNamesShapesAndFairseqOrder) {
  auto m = make(config(true, true, true, true, 1));
  std::vector<std::string> got;
  for (const auto& [name, v] : m->params().items()) {
    if (name.rfind("decoder.layers.0.", 0) != 0) continue;
    std::string n = name.substr(17);
    if (n.rfind("self_attn.", 0) == 0) n = "self_attn";  // q, k, v, out: unchanged by NormFormer
    if (got.empty() || got.back() != n) got.push_back(n);
  }
  const std::vector<std::string> want = {
      "c_attn",          "w_resid",   "self_attn", "attn_ln.weight", "attn_ln.bias", "self_attn_layer_norm.weight",
      "self_attn_layer_norm.bias", "ffn_layernorm.weight", "ffn_layernorm.bias", "fc1.weight", "fc1.bias",
      "fc2.weight",      "fc2.bias",  "final_layer_norm.weight", "final_layer_norm.bias"};
  EXPECT_EQ(got, want);
  const auto& p = m->params();
  EXPECT_EQ(p.get("decoder.layers.0.c_attn").shape(), Shape({kH}));
  EXPECT_EQ(p.get("decoder.layers.0.w_resid").shape(), Shape({kC}));
  EXPECT_EQ(p.get("decoder.layers.0.attn_ln.weight").shape(), Shape({kC}));
  EXPECT_EQ(p.get("decoder.layers.0.ffn_layernorm.bias").shape(), Shape({kF}));
}

TEST(NormFormer, ParameterCountOfEveryCombination) {
  for (int bits = 0; bits < 16; ++bits) {
    const nlohmann::json c = config(bits & 1, bits & 2, bits & 4, bits & 8);
    auto m = build_model(c);
    const int64_t extra = 2 * ((bits & 1 ? kH : 0) + (bits & 2 ? 2 * kC : 0) + (bits & 4 ? 2 * kF : 0) +
                               (bits & 8 ? kC : 0));
    const int64_t plain = build_model(config(false, false, false, false))->params().numel();
    EXPECT_EQ(m->params().numel(), plain + extra) << c.dump();
    EXPECT_EQ(TransformerLM::parameter_count(TransformerLMConfig::from_json(c)), m->params().numel()) << c.dump();
  }
}

TEST(NormFormer, InitDrawsNothingAndStartsAtOne) {
  auto plain = make(config(false, false, false, false));
  auto nf = make(config(true, true, true, true));
  int shared = 0;
  for (const auto& [name, v] : nf->params().items()) {
    const bool ones = name.find("c_attn") != std::string::npos || name.find("w_resid") != std::string::npos ||
                      ((name.find("attn_ln.") != std::string::npos || name.find("ffn_layernorm.") != std::string::npos) &&
                       name.find(".weight") != std::string::npos);
    const bool zeros = (name.find("attn_ln.bias") != std::string::npos || name.find("ffn_layernorm.bias") != std::string::npos);
    if (ones || zeros) {
      const std::vector<float> x = values(v);
      EXPECT_TRUE(std::all_of(x.begin(), x.end(), [&](float f) { return f == (ones ? 1.f : 0.f); })) << name;
      continue;
    }
    EXPECT_EQ(values(v), values(plain->params().get(name))) << name;
    ++shared;
  }
  EXPECT_EQ(shared, static_cast<int>(plain->params().items().size()));
}

TEST(NormFormer, ScalesAtOneAreTheIdentity) {
  auto plain = make(config(false, false, false, false));
  auto scaled = make(config(true, false, false, true));
  EXPECT_EQ(features(*scaled), features(*plain));
  // and not blind to them: w_resid at 1/2 changes the output
  Var w = scaled->params().get("decoder.layers.1.w_resid");
  std::fill(w.data(), w.data() + w.numel(), 0.5f);
  EXPECT_NE(features(*scaled), features(*plain));
}

TEST(NormFormer, HeadScaleIsOutProjGroupsAfterTheProjection) {
  auto plain = make(config(false, false, false, false));
  auto scaled = make(config(true, false, false, false));
  const float c[kH] = {0.5f, 2.0f};
  const int64_t D = kC / kH;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    std::copy(c, c + kH, scaled->params().get(p + "c_attn").data());
    Var w = plain->params().get(p + "self_attn.out_proj.weight"), b = plain->params().get(p + "self_attn.out_proj.bias");
    for (int64_t o = 0; o < kC; ++o) {  // out_proj rows [o] of weight [C, C]: output channel o, head o / D
      for (int64_t i = 0; i < kC; ++i) w.data()[o * kC + i] *= c[o / D];
      b.data()[o] *= c[o / D];
    }
  }
  EXPECT_EQ(features(*scaled), features(*plain));
}

}  // namespace
}  // namespace stretch::models
