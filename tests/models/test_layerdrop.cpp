// --decoder-layerdrop (fairseq's LayerDropModuleList) in transformer_lm: which blocks a training
// forward runs, as take_unused_params() reports them, and what a skipped block means for the output.
//  * p = 0.5 over 400 updates of 4 blocks: each block is skipped in 200 ± 45 of them (≈ 4.5σ of a
//    binomial(400, ½)), and the blocks are drawn independently (all four skipped together in
//    25 ± 19 updates);
//  * the draws are a function of (seed, update, micro-batch): the same call gives the same set,
//    another update another one;
//  * a block skipped in one micro-batch and run in another of the same update is used;
//  * p = 1 skips every block: the training output does not change when the blocks' weights are
//    scaled, the evaluation output does (evaluation runs every block, whatever p);
//  * p = 0 reports nothing, and neither does an evaluation forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "models/registry.h"

namespace stretch::models {
namespace {

std::unique_ptr<LanguageModel> make(float p, int64_t layers = 4) {
  nlohmann::json given = {{"decoder_layers", layers}, {"decoder_embed_dim", 16}, {"decoder_ffn_embed_dim", 32},
                          {"decoder_attention_heads", 2}, {"dropout", 0.0}, {"decoder_layerdrop", p}};
  nlohmann::json config = resolve_config("transformer_lm", given, 8);
  config["vocab_size"] = 40;
  auto model = build_model(config);
  model->init(3);
  return model;
}

Tensor tokens() {
  Tensor t = Tensor::empty({2, 8}, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = 4 + static_cast<int32_t>((i * 7) % 30);
  return t;
}

// The blocks (0..L-1) a training forward at (update, micro) skipped, through take_unused_params().
std::set<int> skipped(LanguageModel& m, uint64_t update, std::vector<uint64_t> micros = {0}) {
  autograd::NoGradGuard no_grad;
  for (uint64_t micro : micros) m.features(tokens(), {.mode = Mode::Train, .seed = 11, .step = update, .micro = micro});
  std::set<int> out;
  for (const std::string& name : m.take_unused_params()) {
    EXPECT_EQ(name.rfind("decoder.layers.", 0), 0u) << name;
    out.insert(std::stoi(name.substr(15)));
  }
  return out;
}

TEST(LayerDrop, HalfTheBlocksIndependentlyOverManyUpdates) {
  auto m = make(0.5f);
  std::vector<int> count(4, 0);
  int all_four = 0;
  for (uint64_t u = 0; u < 400; ++u) {
    const std::set<int> s = skipped(*m, u);
    for (int l : s) ++count[l];
    all_four += s.size() == 4;
  }
  for (int l = 0; l < 4; ++l) EXPECT_NEAR(count[l], 200, 45) << "block " << l;
  EXPECT_NEAR(all_four, 25, 19);
}

TEST(LayerDrop, DrawsAreAFunctionOfSeedUpdateAndMicroBatch) {
  auto m = make(0.5f, 8);
  EXPECT_EQ(skipped(*m, 5), skipped(*m, 5));
  int differ = 0;
  for (uint64_t u = 0; u < 20; ++u) differ += skipped(*m, u) != skipped(*m, u + 1);
  EXPECT_GT(differ, 10);
  // Over two micro-batches a block counts as used when either ran it.
  std::set<int> both;
  const std::set<int> a = skipped(*m, 9, {0}), b = skipped(*m, 9, {1});
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(both, both.begin()));
  EXPECT_EQ(skipped(*m, 9, {0, 1}), both);
}

TEST(LayerDrop, ProbabilityOneSkipsEveryBlockZeroNoneAndEvaluationRunsAll) {
  auto all = make(1.0f);
  EXPECT_EQ(skipped(*all, 0), (std::set<int>{0, 1, 2, 3}));
  auto none = make(0.0f);
  EXPECT_TRUE(skipped(*none, 0).empty());
  // p = 1: the training output does not depend on the blocks' weights; the evaluation output does.
  autograd::NoGradGuard no_grad;
  auto hidden = [&](Mode mode) {
    Var h = all->features(tokens(), {.mode = mode, .seed = 11, .step = 0});
    return std::vector<float>(h.data(), h.data() + h.numel());
  };
  const auto train0 = hidden(Mode::Train), eval0 = hidden(Mode::Eval);
  for (const auto& [name, var] : all->params().items())
    if (name.rfind("decoder.layers.", 0) == 0)
      for (int64_t i = 0; i < var.numel(); ++i) var.data()[i] *= 1.5f;
  EXPECT_EQ(hidden(Mode::Train), train0);
  EXPECT_NE(hidden(Mode::Eval), eval0);
  all->take_unused_params();
  (void)hidden(Mode::Eval);
  EXPECT_TRUE(all->take_unused_params().empty()) << "an evaluation forward marks nothing";
}

}  // namespace
}  // namespace stretch::models
