// --checkpoint-activations (autograd/checkpoint.h) on whole models: one training forward and
// backward with ForwardOptions::activations = Keep and one with Recompute, from the same weights,
// tokens, seed and step, dropout on at every site (embedding, attention probabilities, attention
// output, activations, FFN output). The loss and EVERY parameter's gradient must be equal bit for
// bit (memcmp, no tolerance): the recomputation runs the same kernels on the same values with the
// same counter-based dropout masks, in the same order. The oracle is the Keep run, which records
// each op directly (the path every other test and the PyTorch parity checks cover). The Recompute
// run must also really recompute: its tape holds one entry per block instead of the block's ops.
// Covered: transformer_lm with every --pos, learnable ALiBi slopes, --mem-len memory over two
// segments, pre- and post-norm, adaptive input + adaptive softmax; the roberta encoder. Families
// without it (transformer_xl, adaptive_span) say so (can_recompute_activations() false); the
// trainer's refusal is tested through the binary (tests/train/test_checkpoint_activations_train.cpp).
#include <gtest/gtest.h>

#include <cstring>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "models/registry.h"

namespace stretch::models {
namespace {

Tensor random_tokens(int64_t B, int64_t T, int32_t vocab, uint64_t seed, int32_t pad_every = 0) {
  Rng rng(seed);
  Tensor t = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i)
    t.i32()[i] = pad_every > 0 && i % pad_every == 0 ? 1 : 4 + static_cast<int32_t>(rng.below(vocab - 4));
  return t;
}

struct Pass {
  std::vector<float> loss;
  std::vector<std::vector<float>> grads;  // per parameter, in params() order
  size_t tape_entries = 0;                // entries recorded by the last segment's forward + loss
};

// `segments` training steps of B x T tokens through one model (memory carried when the family
// has it), accumulating gradients as --update-freq would; the gradients after all of them.
Pass run(LanguageModel& model, autograd::Activations activations, int segments, int64_t B, int64_t T, int32_t vocab,
         int32_t pad_targets_every) {
  model.params().zero_grad();
  auto state = model.new_segment_state(SegmentUse::Training);
  Pass out;
  for (int s = 0; s < segments; ++s) {
    const Tensor src = random_tokens(B, T, vocab, 100 + s);
    const Tensor tgt = random_tokens(B, T, vocab, 200 + s, pad_targets_every);
    autograd::tape().clear();
    Var hidden = model.features(src, {.mode = Mode::Train,
                                      .seed = 7,
                                      .step = 3,
                                      .micro = static_cast<uint64_t>(s),
                                      .state = state.get(),
                                      .activations = activations});
    nn::HeadLoss head = model.head().loss(hidden, tgt, /*pad=*/1, nn::LossUse::Training);
    Var loss = head.loss;
    if (Var aux = model.aux_loss(); aux.defined()) loss = autograd::add(loss, aux);
    out.tape_entries = autograd::tape().size();
    out.loss.push_back(head.loss.value().f32()[0]);
    autograd::tape().backward(loss);
  }
  for (const auto& [name, var] : model.params().items()) {
    const Tensor& g = var.grad();
    out.grads.emplace_back(g.f32(), g.f32() + g.numel());
  }
  return out;
}

struct Case {
  std::string name, arch;
  nlohmann::json given;
  int segments = 1;
  int32_t pad_targets_every = 0;  // masked_lm: most targets are pad
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

nlohmann::json with_dropout(nlohmann::json g, const std::string& layers_key) {
  g["dropout"] = 0.2;
  g["attention_dropout"] = 0.15;
  g["activation_dropout"] = 0.1;
  g[layers_key] = 3;
  return g;
}

nlohmann::json lm(nlohmann::json g) {
  g["decoder_embed_dim"] = 24;
  g["decoder_ffn_embed_dim"] = 40;
  g["decoder_attention_heads"] = 3;  // non-power-of-two heads
  return with_dropout(std::move(g), "decoder_layers");
}

class RecomputeIsExact : public ::testing::TestWithParam<Case> {};

TEST_P(RecomputeIsExact, LossAndEveryGradientBitwise) {
  const Case& c = GetParam();
  const int64_t B = 2, T = 9;
  nlohmann::json config = resolve_config(c.arch, c.given, T);
  config["vocab_size"] = 48;
  auto model = build_model(config);
  ASSERT_TRUE(model->can_recompute_activations());
  model->init(5);
  const int32_t V = static_cast<int32_t>(model->info().vocab_size);
  const Pass keep = run(*model, autograd::Activations::Keep, c.segments, B, T, V, c.pad_targets_every);
  const Pass again = run(*model, autograd::Activations::Keep, c.segments, B, T, V, c.pad_targets_every);
  const Pass rec = run(*model, autograd::Activations::Recompute, c.segments, B, T, V, c.pad_targets_every);
  ASSERT_EQ(keep.loss, again.loss) << "the Keep run itself is not deterministic";
  // The recomputing forward records one entry per block instead of the blocks' ops.
  EXPECT_LT(rec.tape_entries + 3 * 5, keep.tape_entries) << rec.tape_entries << " vs " << keep.tape_entries;
  ASSERT_EQ(keep.loss.size(), rec.loss.size());
  for (size_t s = 0; s < keep.loss.size(); ++s)
    EXPECT_EQ(std::memcmp(&keep.loss[s], &rec.loss[s], sizeof(float)), 0)
        << "segment " << s << ": " << keep.loss[s] << " vs " << rec.loss[s];
  const auto& params = model->params().items();
  ASSERT_EQ(keep.grads.size(), params.size());
  size_t nonzero = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(keep.grads[i].size(), rec.grads[i].size()) << params[i].first;
    EXPECT_EQ(std::memcmp(keep.grads[i].data(), rec.grads[i].data(), keep.grads[i].size() * sizeof(float)), 0)
        << params[i].first;
    for (float g : keep.grads[i]) nonzero += g != 0.f;
  }
  EXPECT_GT(nonzero, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Families, RecomputeIsExact,
    ::testing::Values(
        Case{"alibi_pre", "transformer_lm_tiny", lm({{"pos", "alibi"}})},
        Case{"alibi_post", "transformer_lm_tiny", lm({{"pos", "alibi"}, {"decoder_normalize_before", false}})},
        Case{"sinusoidal", "transformer_lm_tiny", lm({{"pos", "sinusoidal"}})},
        Case{"learned", "transformer_lm_tiny", lm({{"pos", "learned"}})},
        Case{"rope", "transformer_lm_tiny", lm({{"pos", "rope"}})},
        Case{"t5", "transformer_lm_tiny", lm({{"pos", "t5"}})},
        Case{"none", "transformer_lm_tiny", lm({{"pos", "none"}})},
        Case{"alibi_learnable", "transformer_lm_tiny", lm({{"pos", "alibi"}, {"alibi_learnable_slopes", true}})},
        Case{"alibi_mem_len", "transformer_lm_tiny", lm({{"pos", "alibi"}, {"mem_len", 9}}), /*segments=*/2},
        Case{"alibi_post_mem_len", "transformer_lm_tiny",
             lm({{"pos", "alibi"}, {"decoder_normalize_before", false}, {"mem_len", 9}}), /*segments=*/2},
        Case{"adaptive", "transformer_lm_tiny",
             lm({{"adaptive_input", true},
                 {"adaptive_input_cutoff", "10,20"},
                 {"adaptive_softmax_cutoff", "10,20"},
                 {"tie_adaptive_weights", true},
                 {"adaptive_softmax_dropout", 0.1}})},
        Case{"roberta", "roberta_tiny",
             with_dropout({{"encoder_embed_dim", 16}, {"encoder_ffn_embed_dim", 32}, {"encoder_attention_heads", 2}},
                          "encoder_layers"),
             1, /*pad_targets_every=*/1000}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(RecomputeActivations, FamiliesWithoutItSaySo) {
  const nlohmann::json span = {{"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}, {"attn_span", 16}};
  for (const auto& [arch, given] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"transformer_xl_tiny", nlohmann::json::object()}, {"adaptive_span", span}}) {
    nlohmann::json config = resolve_config(arch, given, 8);
    config["vocab_size"] = 32;
    EXPECT_FALSE(build_model(config)->can_recompute_activations()) << arch;
  }
}

}  // namespace
}  // namespace stretch::models
