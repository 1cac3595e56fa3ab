// ForwardOptions::last_block_queries (evaluation): the last block computes only the last n
// positions of each row, and those hidden states equal the full forward's at the same
// positions, for every position method, pre- and post-norm, with right padding in a row.
// Tolerance: the same ops on fewer rows; GEMM blocking may differ with M, so 1e-5 relative
// (fp32 rounding 6e-8 times sums over K <= 64, with margin).
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "core/rng.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {
namespace {

class LastBlockQueries : public ::testing::TestWithParam<std::tuple<PosMethod, bool>> {};

TEST_P(LastBlockQueries, EqualsTheFullForwardAtThoseRows) {
  TransformerLMConfig cfg = preset("transformer_lm_tiny");
  cfg.vocab_size = 40;
  cfg.decoder_layers = 3;
  cfg.decoder_embed_dim = 48;
  cfg.decoder_ffn_embed_dim = 64;
  cfg.decoder_attention_heads = 3;
  cfg.pos = std::get<0>(GetParam());
  cfg.decoder_normalize_before = std::get<1>(GetParam());
  cfg.max_target_positions = 32;
  TransformerLM model(cfg);
  model.init(3);
  autograd::NoGradGuard no_grad;
  const int64_t B = 3, T = 11, C = 48;
  Rng rng(5);
  Tensor src = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i) src.i32()[i] = 4 + static_cast<int32_t>(rng.below(36));
  for (int64_t t = 8; t < T; ++t) src.i32()[2 * T + t] = cfg.padding_idx;  // row 2 right-padded
  const Tensor full = model.features(src, {}).value();  // [B, T, C]
  for (int64_t n : {1, 4, 11}) {
    const Tensor part = model.features(src, {.last_block_queries = n}).value();  // [B, n, C]
    ASSERT_EQ(part.shape(), Shape({B, n, C}));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < C; ++ch) {
          const float want = full.f32()[(b * T + T - n + i) * C + ch];
          ASSERT_NEAR(part.f32()[(b * n + i) * C + ch], want, 1e-5f * (1 + std::abs(want)))
              << pos_method_name(cfg.pos) << " n " << n << " row " << b << " position " << T - n + i;
        }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPositions, LastBlockQueries,
                         ::testing::Combine(::testing::Values(PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned,
                                                              PosMethod::Rope, PosMethod::T5, PosMethod::None),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(pos_method_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_prenorm" : "_postnorm");
                         });

}  // namespace
}  // namespace stretch::models
