// Cached (incremental) decoding must give the logits of a full forward pass at every step,
// for every position method — the ALiBi fork applied no bias in this path (REFERENCE.md §1.4).
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm.h"

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
    Tensor logits = model.forward(step, {.cache = &cache}).value();  // [1, n, V]
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
