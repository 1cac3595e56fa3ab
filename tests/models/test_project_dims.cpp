// decoder_input_dim / decoder_output_dim ≠ decoder_embed_dim (issue 12): fairseq's project_in_dim
// and project_out_dim. The parameter count formula against the built model, fairseq's names,
// order and shapes, the feature width the output head reads, and the configs fairseq cannot build
// (usage errors naming the flags). Logits and loss against real fairseq: tests/fairseq
// (proj_post_untied.pt, adaptive_proj.pt).
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "models/transformer_lm/transformer_lm.h"
#include "testing.h"

namespace stretch::models {
namespace {

using stretch::testing::error_of;

TransformerLMConfig dims(int64_t in, int64_t out) {
  TransformerLMConfig c = preset("transformer_lm_tiny");
  c.vocab_size = 40;
  c.decoder_layers = 1;
  c.decoder_embed_dim = 16;
  c.decoder_ffn_embed_dim = 32;
  c.decoder_attention_heads = 2;
  c.dropout = 0.f;
  c.decoder_input_dim = in;
  c.decoder_output_dim = out;
  return c;
}

std::vector<std::string> names(const TransformerLM& m) { return stretch::testing::param_names(m); }

TEST(ProjectDims, ParameterCountMatchesTheBuiltModel) {
  std::vector<TransformerLMConfig> cs = {dims(8, 12), dims(0, 12), dims(8, 0), dims(16, 16)};
  TransformerLMConfig tied = dims(12, 12);
  tied.share_decoder_input_output_embed = true;
  cs.push_back(tied);
  TransformerLMConfig adaptive = dims(8, 12);  // bands of d_0 = 8 (no project_in), softmax over 12
  adaptive.adaptive_input = true;
  adaptive.adaptive_input_cutoff = adaptive.adaptive_softmax_cutoff = "10,25";
  adaptive.adaptive_input_factor = adaptive.adaptive_softmax_factor = 2.f;
  cs.push_back(adaptive);
  for (const auto& c : cs) {
    TransformerLM m(c);
    EXPECT_EQ(TransformerLM::parameter_count(c), m.params().numel()) << c.to_json().dump();
  }
}

TEST(ProjectDims, FairseqNamesOrderAndShapes) {
  TransformerLMConfig c = dims(8, 12);
  c.decoder_normalize_before = true;
  const TransformerLM m(c);
  const std::vector<std::string> n = names(m);
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n[0], "decoder.embed_tokens.weight");
  EXPECT_EQ(n[1], "decoder.project_in_dim.weight");  // fairseq registers it before the positions
  EXPECT_EQ(n[n.size() - 2], "decoder.project_out_dim.weight");  // after the final norm
  EXPECT_EQ(n.back(), "decoder.output_projection.weight");
  EXPECT_EQ(m.params().get("decoder.embed_tokens.weight").shape(), Shape({40, 8}));
  EXPECT_EQ(m.params().get("decoder.project_in_dim.weight").shape(), Shape({16, 8}));
  EXPECT_EQ(m.params().get("decoder.project_out_dim.weight").shape(), Shape({12, 16}));
  EXPECT_EQ(m.params().get("decoder.output_projection.weight").shape(), Shape({40, 12}));
  // Equal dims (or 0): no projection, the names of a plain model.
  for (const auto& plain : {names(TransformerLM(dims(0, 0))), names(TransformerLM(dims(16, 16)))})
    for (const auto& name : plain) EXPECT_EQ(name.find("project_"), std::string::npos) << name;
  TransformerLMConfig a = dims(8, 12);
  a.adaptive_input = true;
  a.adaptive_input_cutoff = a.adaptive_softmax_cutoff = "10,25";
  a.adaptive_input_factor = a.adaptive_softmax_factor = 2.f;  // input bands 8, 4, 2; softmax tails 6, 3
  const TransformerLM am(a);
  EXPECT_FALSE(am.params().contains("decoder.project_in_dim.weight"));  // AdaptiveInput projects to C itself
  EXPECT_EQ(am.params().get("decoder.embed_tokens.embeddings.0.0.weight").shape(), Shape({10, 8}));
  EXPECT_EQ(am.params().get("decoder.embed_tokens.embeddings.1.1.weight").shape(), Shape({16, 4}));
  EXPECT_EQ(am.params().get("decoder.adaptive_softmax.head.weight").shape(), Shape({12, 12}));  // 10 words + 2, over 12
  EXPECT_EQ(am.params().get("decoder.adaptive_softmax.tail.0.0.weight").shape(), Shape({6, 12}));  // 12 / 2
  EXPECT_EQ(am.params().get("decoder.adaptive_softmax.tail.1.2.weight").shape(), Shape({15, 3}));  // 12 / 4
}

TEST(ProjectDims, FeaturesHaveTheOutputWidth) {
  TransformerLM m(dims(8, 12));
  m.init(7);
  Tensor src = Tensor::empty({2, 5}, DType::I32);
  for (int64_t i = 0; i < 10; ++i) {
    src.i32()[i] = static_cast<int32_t>(4 + i * 3 % 36);
  }
  autograd::NoGradGuard no_grad;
  const Var h = m.features(src, {.mode = Mode::Eval});
  EXPECT_EQ(h.shape(), Shape({2, 5, 12}));
  EXPECT_EQ(m.output(h).shape(), Shape({2, 5, 40}));
}

TEST(ProjectDims, ConfigsFairseqCannotBuildAreUsageErrors) {
  TransformerLMConfig tied = dims(8, 12);
  tied.share_decoder_input_output_embed = true;
  EXPECT_NE(error_of([&] { tied.validate(); }).find("--share-decoder-input-output-embed: --decoder-input-dim 8 and --decoder-output-dim 12 differ"),
            std::string::npos);
  TransformerLMConfig adaptive = dims(12, 12);
  adaptive.adaptive_input = true;
  adaptive.adaptive_input_cutoff = adaptive.adaptive_softmax_cutoff = "10,25";
  adaptive.tie_adaptive_weights = true;
  EXPECT_NE(error_of([&] { adaptive.validate(); }).find("--tie-adaptive-weights needs --decoder-input-dim = --decoder-output-dim"),
            std::string::npos);
  TransformerLMConfig negative = dims(-1, 0);
  EXPECT_NE(error_of([&] { negative.validate(); }).find("--decoder-input-dim -1"), std::string::npos);
}

}  // namespace
}  // namespace stretch::models
