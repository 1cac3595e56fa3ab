// The model-family layer: the --arch registry, the config field table (JSON, overrides, the
// resume check), the dropout-stream range checks, the full-softmax head against a double
// reference, and a family's segment state in training checkpoints.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "core/rng.h"
#include "models/registry.h"
#include "models/transformer_lm/transformer_lm.h"
#include "testing.h"
#include "train/checkpoint.h"

namespace stretch::models {
namespace {

using stretch::testing::error_of;

nlohmann::json tiny(nlohmann::json given = nlohmann::json::object()) {
  given["vocab_size"] = 24;
  given["decoder_embed_dim"] = 16;
  given["decoder_ffn_embed_dim"] = 32;
  given["decoder_attention_heads"] = 2;
  return resolve_config("transformer_lm_tiny", given, 32);
}

TEST(Registry, ArchNamesMapToTheirPresets) {
  const nlohmann::json wiki = resolve_config("transformer_lm_wiki103", nlohmann::json::object(), 512);
  EXPECT_EQ(wiki.at("decoder_layers"), 16);  // fairseq's transformer_lm_wiki103
  EXPECT_EQ(wiki.at("decoder_embed_dim"), 1024);
  EXPECT_EQ(wiki.at("no_decoder_final_norm"), true);
  EXPECT_EQ(resolve_config("transformer_lm_baevski_wiki103", nlohmann::json::object(), 512).at("decoder_layers"), 16);
  const nlohmann::json t = resolve_config("transformer_lm_tiny", {{"decoder_layers", 3}}, 96);
  EXPECT_EQ(t.at("decoder_layers"), 3);          // a given flag wins over the preset
  EXPECT_EQ(t.at("decoder_embed_dim"), 128);     // the preset's
  EXPECT_EQ(t.at("tokens_per_sample"), 96);
  EXPECT_EQ(t.at("max_target_positions"), 96);   // fairseq: = tokens_per_sample unless given
  EXPECT_EQ(&family_of_arch("transformer_lm_small"), &family_of_config(t, "t"));
  const std::string e = error_of([] { family_of_arch("transformer_xl_huge"); });
  EXPECT_NE(e.find("unknown architecture 'transformer_xl_huge'"), std::string::npos) << e;
  EXPECT_NE(e.find("transformer_lm_tiny"), std::string::npos) << e;
  EXPECT_NE(error_of([] { family_of_config({{"decoder_layers", 2}}, "ck.pt"); }).find("ck.pt"), std::string::npos);
}

TEST(Registry, FieldTableGivesEveryCommandLineFlagOnce) {
  std::set<std::string> keys, flags;
  for (const auto& f : model_fields()) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    if (!f.flag.empty()) {
      EXPECT_TRUE(flags.insert(f.flag).second) << f.flag;
    }
  }
  for (const char* flag : {"--decoder-layers", "--decoder-embed-dim", "--pos", "--dropout", "--rope-base",
                           "--activation-dropout,--relu-dropout", "--share-decoder-input-output-embed"})
    EXPECT_TRUE(flags.count(flag)) << flag;
  // Keys set by the program, not by a flag.
  for (const auto& f : model_fields()) {
    if (f.key == "vocab_size" || f.key == "padding_idx") {
      EXPECT_TRUE(f.flag.empty()) << f.key;
    }
  }
}

TEST(Registry, ConfigRoundTripsAndWrongTypesNameTheKey) {
  const nlohmann::json c = tiny({{"pos", "t5"}, {"dropout", 0.25}});
  EXPECT_EQ(build_model(c)->config_json(), c);
  EXPECT_EQ(apply_overrides(c, nlohmann::json::object(), OverrideUse::Evaluation, "x"), c);
  const std::string wrong = error_of([&] { apply_overrides(c, {{"decoder_layers", "two"}}, OverrideUse::Training, "--model-overrides"); });
  EXPECT_NE(wrong.find("--model-overrides"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("'decoder_layers'"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("\"two\""), std::string::npos) << wrong;
  const std::string frac = error_of([&] { apply_overrides(c, {{"decoder_layers", 2.5}}, OverrideUse::Training, "o"); });
  EXPECT_NE(frac.find("not an integer"), std::string::npos) << frac;
  // (mem_len is a transformer_lm key since issue 13's --mem-len; clamp_len is Transformer-XL's only.)
  const std::string unknown = error_of([&] { apply_overrides(c, {{"clamp_len", 4}}, OverrideUse::Training, "o"); });
  EXPECT_NE(unknown.find("unknown model config key 'clamp_len'"), std::string::npos) << unknown;
  // fairseq's buffer-sizing keys are accepted and change nothing.
  EXPECT_EQ(apply_overrides(c, {{"max_tokens", 1024}}, OverrideUse::Evaluation, "o"), c);
}

TEST(Registry, StructuralDifferencesAreTheKeysThatChangeTheFunction) {
  const nlohmann::json a = tiny();
  EXPECT_EQ(structural_differences(a, a), "");
  EXPECT_EQ(structural_differences(a, tiny({{"dropout", 0.3}})), "");  // dropout may differ on resume
  EXPECT_EQ(structural_differences(a, tiny({{"rope_base", 500.0}})), "");  // rope_base only matters for rope
  const std::string pos = structural_differences(a, tiny({{"pos", "rope"}}));
  EXPECT_NE(pos.find("pos \"alibi\" (this run: \"rope\")"), std::string::npos) << pos;
  const nlohmann::json r = tiny({{"pos", "rope"}});
  EXPECT_NE(structural_differences(r, tiny({{"pos", "rope"}, {"rope_base", 500.0}})).find("rope_base"),
            std::string::npos);
  EXPECT_NE(structural_differences(a, tiny({{"decoder_layers", 3}})).find("decoder_layers 2 (this run: 3)"),
            std::string::npos);
}

TEST(TransformerLM, DropoutStreamsThatWouldCollideAreRefused) {
  // 4095 layers fit the 12-bit layer field ((layer + 1) << 4); 4096 would repeat masks.
  const std::string layers = error_of([] { build_model(tiny({{"decoder_layers", 4096}})); });
  EXPECT_NE(layers.find("--decoder-layers 4096"), std::string::npos) << layers;
  auto model = build_model(tiny({{"dropout", 0.1}}));
  model->init(1);
  Tensor src = Tensor::empty({1, 4}, DType::I32);
  for (int i = 0; i < 4; ++i) src.i32()[i] = 4 + i;
  autograd::NoGradGuard no_grad;
  EXPECT_NO_THROW(model->features(src, {.mode = Mode::Train, .micro = 255}));  // the 256th micro-batch
  const std::string micro = error_of([&] { model->features(src, {.mode = Mode::Train, .micro = 256}); });
  EXPECT_NE(micro.find("--update-freq 257"), std::string::npos) << micro;
  // Evaluation has no dropout: any micro index is fine there.
  EXPECT_NO_THROW(model->features(src, {.mode = Mode::Eval, .micro = 300}));
}

TEST(SoftmaxHead, LossTargetNllAndScoresAgreeWithADoubleReference) {
  auto model = build_model(tiny({{"share_decoder_input_output_embed", true}}));
  model->init(3);
  autograd::NoGradGuard no_grad;
  const int64_t T = 7, V = model->info().vocab_size;
  Tensor src = Tensor::empty({1, T}, DType::I32), tgt = Tensor::empty({1, T}, DType::I32);
  for (int t = 0; t < T; ++t) src.i32()[t] = 4 + (t * 5) % 20, tgt.i32()[t] = 4 + (t * 7) % 20;
  tgt.i32()[T - 1] = model->info().padding_idx;  // not scored
  const Tensor hidden = model->features(src, {}).value();  // [1, T, C]
  const int64_t C = hidden.dim(2);
  // Reference: logits = hidden · E[v] (tied embedding), log-softmax in double.
  const Tensor& E = model->params().get("decoder.embed_tokens.weight").value();
  double ref_sum = 0;
  std::vector<double> ref_nll(T);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> z(V);
    double mx = -INFINITY, se = 0;
    for (int64_t v = 0; v < V; ++v) {
      for (int64_t c = 0; c < C; ++c) z[v] += static_cast<double>(hidden.f32()[t * C + c]) * E.f32()[v * C + c];
      mx = std::max(mx, z[v]);
    }
    for (double x : z) se += std::exp(x - mx);
    ref_nll[t] = mx + std::log(se) - z[tgt.i32()[t]];
    if (t < T - 1) ref_sum += ref_nll[t];
  }
  const nn::HeadLoss loss = model->head().loss(Var(hidden), tgt, model->info().padding_idx, nn::LossUse::Validation);
  EXPECT_EQ(loss.ntokens, T - 1);
  EXPECT_EQ(loss.sample_size, static_cast<double>(T - 1));
  EXPECT_NEAR(loss.loss.value().f32()[0], ref_sum, 1e-4 * std::abs(ref_sum));
  // target_nll over rows in any order, in chunks of 2 rows.
  const std::vector<int64_t> rows = {5, 0, 3, 6};
  std::vector<int32_t> targets;
  for (int64_t r : rows) targets.push_back(tgt.i32()[r]);
  std::vector<float> nll(rows.size());
  model->head().target_nll(hidden, rows, targets, nll.data(), 2);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(nll[i], ref_nll[rows[i]], 1e-5 + 1e-5 * ref_nll[rows[i]]) << i;
  const Tensor scores = model->head().log_scores(hidden);  // [1, T, V]
  ASSERT_EQ(scores.numel(), T * V);
  double se = 0;
  for (int64_t v = 0; v < V; ++v) se += std::exp(static_cast<double>(scores.f32()[2 * V + v]));
  EXPECT_NEAR(std::log(se) - scores.f32()[2 * V + tgt.i32()[2]], ref_nll[2], 1e-4);
}

// A family with training memory saves it in the checkpoint and gets it back on resume.
class FakeMemory final : public SegmentState {
 public:
  Tensor h = Tensor::zeros({2, 3});
  int64_t position() const override { return 0; }
  int64_t kept() const override { return 0; }
  void keep_last(int64_t) override {}
  NamedTensors save() const override { return {{"layers.0.hidden", h}}; }
  void load(const NamedTensors& t) override {
    ASSERT_EQ(t.size(), 1u);
    ASSERT_EQ(t[0].first, "layers.0.hidden");
    h.copy_from(t[0].second);
  }
};

TEST(Checkpoint, SegmentStateTravelsWithTheTrainingStateNotTheWeights) {
  stretch::testing::TempDir tmp;
  auto model = build_model(tiny());
  model->init(2);
  FakeMemory mem;
  for (int i = 0; i < 6; ++i) mem.h.f32()[i] = 0.5f * static_cast<float>(i) - 1.f;
  train::save_checkpoint(tmp / "ck.pt", *model, {.dict_hash = "h", .dictionary = "a 1\n", .segment = &mem});
  const train::CheckpointContents ck = train::read_checkpoint(tmp / "ck.pt");
  EXPECT_EQ(ck.dictionary, "a 1\n");
  FakeMemory back;
  back.load(train::segment_tensors(ck));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back.h.f32()[i], mem.h.f32()[i]);
  // The weights load without complaint (segment.* is training state, not a tensor of the model).
  auto again = build_model(ck.model);
  EXPECT_NO_THROW(load_weights(*again, ck));
  // A model file (no training state) is not a checkpoint to resume from.
  write_model_file(tmp / "m.pt", *model, {.dict_hash = "h"});
  const std::string e = error_of([&] { train::read_checkpoint(tmp / "m.pt"); });
  EXPECT_NE(e.find("model file without training state"), std::string::npos) << e;
  EXPECT_NO_THROW(load_model(tmp / "m.pt", nlohmann::json::object(), OverrideUse::Evaluation));
}

}  // namespace
}  // namespace stretch::models
