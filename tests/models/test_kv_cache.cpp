// Cached (incremental) decoding must give the logits of a full forward pass at every step,
// for every position method — the ALiBi fork applied no bias in this path (REFERENCE.md §1.4).
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {

class KvCache_ : public ::testing::TestWithParam<PosMethod> {};

TEST_P(KvCache_, IncrementalEqualsFullForward) {
  TransformerLMConfig cfg = preset("transformer_lm_tiny");
  cfg.vocab_size = 40;
  cfg.decoder_layers = 2;
  cfg.decoder_attention_heads = 3;  // non-power-of-two heads: the non-geometric slope rule
  cfg.decoder_embed_dim = 48;
  cfg.decoder_ffn_embed_dim = 64;
  cfg.pos = GetParam();
  cfg.max_target_positions = 64;
  TransformerLM model(cfg);
  model.init(7);
  autograd::NoGradGuard no_grad;

  const int64_t T = 13;
  Rng rng(3);
  Tensor src = Tensor::empty({1, T}, DType::I32);
  for (int64_t t = 0; t < T; ++t) src.i32()[t] = 4 + static_cast<int32_t>(rng.below(36));
  Tensor full = model.forward(src, {}).value();  // [1, T, V]

  KvCache cache;
  // First a 4-token prefix in one call, then one token at a time.
  int64_t t = 0;
  while (t < T) {
    const int64_t n = t == 0 ? 4 : 1;
    Tensor step = Tensor::empty({1, n}, DType::I32);
    for (int64_t i = 0; i < n; ++i) step.i32()[i] = src.i32()[t + i];
    Tensor logits = model.forward(step, {.state = &cache}).value();  // [1, n, V]
    for (int64_t i = 0; i < n; ++i)
      for (int64_t v = 0; v < cfg.vocab_size; ++v) {
        const float want = full.f32()[(t + i) * cfg.vocab_size + v];
        // fp32 with a different summation order (tiles of S differ): 1e-4 relative.
        ASSERT_NEAR(logits.f32()[i * cfg.vocab_size + v], want, 1e-4f * (1 + std::abs(want)))
            << pos_method_name(cfg.pos) << " position " << t + i;
      }
    t += n;
  }
  EXPECT_EQ(cache.length, T);
}

INSTANTIATE_TEST_SUITE_P(AllPositions, KvCache_,
                         ::testing::Values(PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope,
                                           PosMethod::T5, PosMethod::None),
                         [](const auto& info) { return std::string(pos_method_name(info.param)); });

// Learned positions past their table are the published failure: a clear usage error, not a crash.
// q_proj, k_proj and v_proj are views of one fused [3C, C] weight (rows q; k; v) and so are their
// gradients: writing a named parameter (as a checkpoint load does) changes the fused rows, and
// zero_grad clears the fused gradient.
TEST(TransformerLM, QkvParametersAreViewsOfTheFusedWeight) {
  models::TransformerLMConfig c = models::preset("transformer_lm_tiny");
  c.vocab_size = 50;
  models::TransformerLM model(c);
  model.init(1);
  const int64_t C = c.decoder_embed_dim;
  const auto& P = model.params();
  const autograd::Var& q = P.get("decoder.layers.1.self_attn.q_proj.weight");
  const autograd::Var& k = P.get("decoder.layers.1.self_attn.k_proj.weight");
  const autograd::Var& v = P.get("decoder.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(k.data(), q.data() + C * C);
  EXPECT_EQ(v.data(), q.data() + 2 * C * C);
  EXPECT_EQ(k.grad_data(), q.grad_data() + C * C);
  EXPECT_EQ(P.get("decoder.layers.1.self_attn.v_proj.bias").data(),
            P.get("decoder.layers.1.self_attn.q_proj.bias").data() + 2 * C);
  // The init drew different values for the three (not one shared block).
  EXPECT_NE(q.data()[0], k.data()[0]);
  EXPECT_NE(k.data()[0], v.data()[0]);
  Tensor loaded = Tensor::full({C, C}, 0.25f);
  k.value().copy_from(loaded);
  EXPECT_EQ(q.data()[C * C], 0.25f);
  k.grad_data()[3] = 7.f;
  model.params().zero_grad();
  EXPECT_EQ(q.grad_data()[C * C + 3], 0.f);
}

TEST(TransformerLM, LearnedPositionsPastTableIsAClearError) {
  TransformerLMConfig cfg = preset("transformer_lm_tiny");
  cfg.vocab_size = 16;
  cfg.pos = PosMethod::Learned;
  cfg.max_target_positions = 8;
  TransformerLM model(cfg);
  model.init(1);
  autograd::NoGradGuard no_grad;
  Tensor ids = Tensor::empty({1, 9}, DType::I32);
  for (int i = 0; i < 9; ++i) ids.i32()[i] = 5;
  try {
    model.forward(ids, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("learned positions"), std::string::npos) << e.what();
  }
}

}  // namespace stretch::models
