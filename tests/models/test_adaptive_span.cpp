// tests/models/test_adaptive_span.cpp — the adaptive_span family (models/adaptive_span/): its
// config (AdaptiveSpanSmallConfig's defaults, fairseq's flags, usage errors), fairseq's parameter
// names and shapes, the cache sizes of §5.2 through features() in fairseq's order (sizes from the
// raw z, then the clamp), the two clamp modes, the aux loss and the span cache's exact resume.
// Expected values are worked out by hand in the comments (L = 200, R = 16 unless said otherwise).
// The numerical parity with the float64 PyTorch oracle is tests/parity/run_adaptive_span_parity.py.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "core/error.h"
#include "models/adaptive_span/adaptive_span_lm.h"
#include "models/adaptive_span/span_cache.h"
#include "models/registry.h"

namespace stretch::models {
namespace {

nlohmann::json small_config(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = resolve_config("adaptive_span",
                                    {{"n_layer", 2}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}, {"attn_span", 200},
                                     {"adapt_span_ramp", 16}},
                                    24);
  j["vocab_size"] = 30;
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

Tensor tokens(int64_t B, int64_t M, int32_t start) {
  Tensor t = Tensor::empty({B, M}, DType::I32);
  for (int64_t i = 0; i < B * M; ++i) t.i32()[i] = 4 + (start + static_cast<int32_t>(i) * 7) % 26;
  return t;
}

TEST(AdaptiveSpan, DefaultsAreAdaptiveSpanSmallConfig) {
  const nlohmann::json j = resolve_config("adaptive_span", nlohmann::json::object(), 512);
  EXPECT_EQ(j.at("n_layer"), 8);
  EXPECT_EQ(j.at("d_model"), 256);
  EXPECT_EQ(j.at("n_head"), 4);
  EXPECT_EQ(j.at("d_inner"), 1024);
  EXPECT_EQ(j.at("attn_span"), 1024);
  EXPECT_EQ(j.at("adapt_span_ramp"), 32);
  EXPECT_EQ(j.at("adapt_span_init"), 0.0);
  EXPECT_FLOAT_EQ(j.at("aux_loss_scaler").get<float>(), 2e-6f);
  EXPECT_EQ(j.at("adapt_span_layer"), false);
  EXPECT_EQ(j.at("dropout"), 0.0);
  EXPECT_EQ(j.at("emb_dropout"), 0.0);
  EXPECT_EQ(j.at("criterion"), "adaptive_span_loss");
  EXPECT_EQ(j.at("adapt_span_clamp"), "forward");       // the port by default
  EXPECT_EQ(j.at("adapt_span_renormalise"), false);
}

TEST(AdaptiveSpan, UsageErrorsNameTheFlag) {
  auto message = [](const nlohmann::json& j) {
    try {
      validate_config(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(small_config({{"n_head", 3}})).find("--n-head"), std::string::npos);  // 16 % 3 != 0
  EXPECT_NE(message(small_config({{"attn_span", 0}})).find("--attn-span"), std::string::npos);
  EXPECT_NE(message(small_config({{"dropout", 1.0}})).find("--dropout"), std::string::npos);
  EXPECT_NE(message(small_config({{"criterion", "cross_entropy"}})).find("adaptive_span_loss"), std::string::npos);
  EXPECT_NE(message(small_config({{"adapt_span_clamp", "sometimes"}})).find("--adapt-span-clamp"), std::string::npos);
  EXPECT_NE(message(small_config({{"decoder_layers", 3}})).find("decoder_layers"), std::string::npos);  // not this family's
}

TEST(AdaptiveSpan, FairseqParameterNamesAndShapes) {
  auto model = build_model(small_config());
  const auto& items = model->params().items();
  // in_emb, out_emb (2), key_pe, then per layer: z, 4 projections, norm1 (2), fc1 (2), fc2 (2), norm2 (2).
  ASSERT_EQ(items.size(), 4u + 2u * 13u);
  EXPECT_EQ(items[0].first, "decoder.model.in_emb.weight");
  EXPECT_EQ(items[1].first, "decoder.model.out_emb.weight");
  EXPECT_EQ(items[2].first, "decoder.model.out_emb.bias");
  EXPECT_EQ(items[3].first, "decoder.model.key_pe");
  EXPECT_EQ(items[3].second.shape(), (Shape{1, 8, 200}));  // [1, D, L]
  EXPECT_EQ(items[4].first, "decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val");
  EXPECT_EQ(items[4].second.shape(), (Shape{2, 1, 1}));  // [H, 1, 1]
  EXPECT_EQ(items[5].first, "decoder.model.layers.0.attn.proj_query.weight");
  EXPECT_FALSE(model->params().contains("decoder.model.layers.0.attn.proj_query.bias"));
  EXPECT_EQ(items[16].first, "decoder.model.layers.0.norm2.bias");
  auto per_layer = build_model(small_config({{"adapt_span_layer", true}}));
  EXPECT_EQ(per_layer->params().get("decoder.model.layers.1.attn.attn.adaptive_span._mask.current_val").shape(),
            (Shape{1}));
}

// z = −0.2 at L = 200, R = 16: raw max size clamp(ceil(−40) + 16, 0, 200) = 0, trim
// 64·floor(min(199, 200)/64) = 192, S = 8, cache size min(200, 8 + 64) = 72. After the clamp z = 0:
// size 16, trim 64·floor(184/64) = 128, S = 72, cache size 136.
TEST(AdaptiveSpan, SizesFromTheRawZThenClamp) {
  auto model = build_model(small_config({{"adapt_span_init", -0.2}}));
  model->init(1);
  auto* span = dynamic_cast<AdaptiveSpanLM*>(model.get());
  ASSERT_NE(span, nullptr);
  auto state = model->new_segment_state(SegmentUse::Training);
  autograd::NoGradGuard no_grad;
  model->features(tokens(2, 24, 0), {.state = state.get()});
  for (const auto& s : span->last_sizes()) {
    EXPECT_EQ(s.trim_len, 192);
    EXPECT_EQ(s.span, 8);
    EXPECT_EQ(s.cache_size, 72);
    EXPECT_EQ(s.cache_rows_in, 72);  // init_hid_cache: zeros of get_cache_size() rows
  }
  const Var& z = model->params().get("decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val");
  EXPECT_EQ(z.data()[0], 0.f);  // clamped in the forward
  // Next cache: size 72 > M = 24: min(72, 72 − 24) = 48 old rows + 24 new = 72 rows.
  auto* cache = dynamic_cast<SpanCache*>(state.get());
  EXPECT_EQ(cache->layer(0).dim(1), 72);
  model->features(tokens(2, 24, 5), {.state = state.get()});
  for (const auto& s : span->last_sizes()) {
    EXPECT_EQ(s.span, 72);
    EXPECT_EQ(s.cache_size, 136);
    EXPECT_EQ(s.cache_rows_in, 72);
  }
  // 136 > 24: min(72, 112) = 72 old rows + 24 = 96 rows (the cache grows towards 136).
  EXPECT_EQ(cache->layer(1).dim(1), 96);
  const auto metrics = model->train_metrics();
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].first, "avg_span");
  EXPECT_EQ(metrics[0].second, 16.0);  // clamp(ceil(0) + 16) per layer
  EXPECT_EQ(metrics[1].second, 16.0);
}

TEST(AdaptiveSpan, ClampModes) {
  for (const char* mode : {"forward", "after_step"}) {
    auto model = build_model(small_config({{"adapt_span_clamp", mode}, {"adapt_span_init", 1.5}}));
    model->init(3);
    const Var& z = model->params().get("decoder.model.layers.1.attn.attn.adaptive_span._mask.current_val");
    {
      autograd::NoGradGuard no_grad;
      model->features(tokens(1, 24, 0), {});
    }
    EXPECT_EQ(z.data()[1], std::string(mode) == "forward" ? 1.f : 1.5f) << mode;
    model->after_step();
    EXPECT_EQ(z.data()[1], 1.f) << mode;
  }
}

// aux = scaler · Σ_l L·mean(z_l) · B·M: 2 layers at z = 0.25, L = 200, scaler 1e-3, B·M = 48:
// 1e-3 · 2 · 50 · 48 = 4.8; ∂/∂z_lh = scaler · L / H · B·M = 1e-3 · 100 · 48 = 4.8.
TEST(AdaptiveSpan, AuxLossScaledToTheSampleSize) {
  auto model = build_model(small_config({{"adapt_span_init", 0.25}, {"aux_loss_scaler", 1e-3}}));
  model->init(2);
  model->params().zero_grad();
  Var h = model->features(tokens(2, 24, 1), {.mode = Mode::Train});
  (void)h;
  Var aux = model->aux_loss();
  ASSERT_TRUE(aux.defined());
  EXPECT_NEAR(aux.value().f32()[0], 4.8f, 1e-5f);
  autograd::tape().backward(aux);
  const Var& z = model->params().get("decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val");
  EXPECT_NEAR(z.grad().f32()[0], 4.8f, 1e-5f);
  EXPECT_NEAR(z.grad().f32()[1], 4.8f, 1e-5f);
}

TEST(AdaptiveSpan, CacheSavedAndLoadedContinuesBitForBit) {
  auto model = build_model(small_config({{"adapt_span_init", 0.3}}));
  model->init(4);
  autograd::NoGradGuard no_grad;
  auto a = model->new_segment_state(SegmentUse::Training);
  model->features(tokens(2, 24, 0), {.state = a.get()});
  auto b = model->new_segment_state(SegmentUse::Training);
  b->load(a->save());
  EXPECT_EQ(b->position(), 24);
  const Tensor ha = model->features(tokens(2, 24, 9), {.state = a.get()}).value();
  const Tensor hb = model->features(tokens(2, 24, 9), {.state = b.get()}).value();
  ASSERT_EQ(ha.numel(), hb.numel());
  for (int64_t i = 0; i < ha.numel(); ++i) ASSERT_EQ(ha.f32()[i], hb.f32()[i]) << i;
  // A fresh cache (zeros) gives another result: the cache is used.
  const Tensor hc = model->features(tokens(2, 24, 9), {}).value();
  double diff = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) diff = std::max(diff, std::abs(double(ha.f32()[i]) - hc.f32()[i]));
  EXPECT_GT(diff, 1e-4);
  // A batch of another size is a usage error.
  EXPECT_THROW(model->features(tokens(3, 24, 9), {.state = a.get()}), Error);
}

TEST(AdaptiveSpan, GenerationAndKvCacheAreRefused) {
  auto model = build_model(small_config());
  EXPECT_THROW(model->new_segment_state(SegmentUse::Decode), Error);
  EXPECT_THROW(model->new_segment_state(SegmentUse::Memory), Error);
}

}  // namespace
}  // namespace stretch::models
