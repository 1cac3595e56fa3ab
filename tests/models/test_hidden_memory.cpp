// XL-style memory of transformer_lm (--mem-len, models/transformer_lm/hidden_memory.h).
//
// The equality the memory must satisfy. For a causal stack, the input of layer l at a position p
// of one long forward pass over the concatenation depends only on tokens ≤ p. Segment k's memory
// holds, per layer, the inputs of layer l for the earlier tokens as segment k−1 computed them; if
// the memory keeps EVERY earlier token (mem_len ≥ all earlier segments), then by induction over
// segments those stored inputs are exactly the long forward's inputs at those positions, and
// every layer of segment k attends to exactly the keys the long forward gives it, at the same
// distances — provided the position method measures distances across the memory boundary (query i
// at absolute position S + i, ALiBi's −m·(p_i − j)). So with full memory the segment's hidden
// states equal the long forward's rows for that segment, up to fp32 summation order (the tiles
// over S keys differ): 1e-4 relative, as the KV-cache test. A positions bug (the query counted
// from 0 inside the segment, lucidrains/x-transformers#242) shifts every bias by S·m_h and fails
// this by far more. With a shorter memory (mem_len < the history) segment 3's first layer no
// longer sees segment 1, so the result must differ: the truncation is real.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/transformer_lm/hidden_memory.h"
#include "models/transformer_lm/transformer_lm.h"

namespace stretch::models {
namespace {

TransformerLMConfig small_config(PosMethod pos, int64_t mem_len) {
  TransformerLMConfig cfg = preset("transformer_lm_tiny");
  cfg.vocab_size = 40;
  cfg.decoder_layers = 3;
  cfg.decoder_attention_heads = 3;  // non-power-of-two heads
  cfg.decoder_embed_dim = 48;
  cfg.decoder_ffn_embed_dim = 64;
  cfg.pos = pos;
  cfg.mem_len = mem_len;
  return cfg;
}

Tensor random_tokens(int64_t B, int64_t T, uint64_t seed) {
  Rng rng(seed);
  Tensor src = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < B * T; ++i) src.i32()[i] = 4 + static_cast<int32_t>(rng.below(36));
  return src;
}

// Columns [t0, t0 + n) of src [B, T].
Tensor columns(const Tensor& src, int64_t t0, int64_t n) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor out = Tensor::empty({B, n}, DType::I32);
  for (int64_t b = 0; b < B; ++b) std::copy_n(src.i32() + b * T + t0, n, out.i32() + b * n);
  return out;
}

// Max relative difference between segment k's hidden [B, n, C] and the long forward's rows.
double max_rel_diff(const Tensor& seg, const Tensor& full, int64_t t0) {
  const int64_t B = seg.dim(0), n = seg.dim(1), C = seg.dim(2), T = full.dim(1);
  double worst = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const double want = full.f32()[(b * T + t0 + t) * C + c], got = seg.f32()[(b * n + t) * C + c];
        worst = std::max(worst, std::abs(got - want) / (1 + std::abs(want)));
      }
  return worst;
}

class Memory_ : public ::testing::TestWithParam<PosMethod> {};

TEST_P(Memory_, FullMemoryEqualsOneLongForward) {
  const int64_t B = 2, T = 7, K = 3;  // three segments
  TransformerLM model(small_config(GetParam(), /*mem_len=*/K * T));
  model.init(11);
  autograd::NoGradGuard no_grad;
  const Tensor src = random_tokens(B, K * T, 5);
  const Tensor full = model.features(src, {}).value();  // [B, K·T, C]
  auto state = model.new_segment_state(SegmentUse::Training);
  ASSERT_NE(state, nullptr);
  for (int64_t k = 0; k < K; ++k) {
    const Tensor seg = model.features(columns(src, k * T, T), {.state = state.get()}).value();
    EXPECT_LT(max_rel_diff(seg, full, k * T), 1e-4) << pos_method_name(GetParam()) << " segment " << k;
    EXPECT_EQ(state->kept(), (k + 1) * T);
  }
  EXPECT_EQ(state->position(), K * T);
}

TEST_P(Memory_, ShorterMemoryForgetsTheFirstSegment) {
  const int64_t B = 2, T = 7;
  TransformerLM model(small_config(GetParam(), /*mem_len=*/T));
  model.init(11);
  autograd::NoGradGuard no_grad;
  const Tensor src = random_tokens(B, 3 * T, 5);
  const Tensor full = model.features(src, {}).value();
  auto state = model.new_segment_state(SegmentUse::Training);
  Tensor seg;
  for (int64_t k = 0; k < 3; ++k) seg = model.features(columns(src, k * T, T), {.state = state.get()}).value();
  EXPECT_EQ(state->kept(), T);
  // Segment 2 (the second) still equals the long forward: its memory held all of segment 1.
  // Segment 3's first layer sees only segment 2, so it must differ from the long forward.
  EXPECT_GT(max_rel_diff(seg, full, 2 * T), 1e-3) << pos_method_name(GetParam());
}

INSTANTIATE_TEST_SUITE_P(RelativePositions, Memory_,
                         ::testing::Values(PosMethod::Alibi, PosMethod::T5, PosMethod::None),
                         [](const auto& info) { return std::string(pos_method_name(info.param)); });

TEST(Memory, PaddedKeysInTheMemoryStayMasked) {
  // A segment whose second row ends in padding, then one more segment: the padded tokens'
  // inputs enter the memory but their keys stay masked, so row 1 of the next segment equals a
  // long forward over the row without the padded tokens.
  TransformerLM model(small_config(PosMethod::Alibi, 64));
  model.init(3);
  autograd::NoGradGuard no_grad;
  const int64_t T = 6;
  Tensor a = random_tokens(2, T, 8), b = random_tokens(2, T, 9);
  a.i32()[T + 4] = a.i32()[T + 5] = 1;  // row 1: two pads at the end of segment a
  auto state = model.new_segment_state(SegmentUse::Training);
  model.features(a, {.state = state.get()});
  const Tensor seg = model.features(b, {.state = state.get()}).value();  // [2, T, C]
  // Row 1 as one sequence without the pads: a[1, 0:4] ‖ b[1, :]. The ALiBi distances differ by
  // the two masked positions, so compare with the same layout instead: the pads are in the long
  // input too, masked as key padding.
  Tensor longer = Tensor::empty({1, 2 * T}, DType::I32);
  std::copy_n(a.i32() + T, T, longer.i32());
  std::copy_n(b.i32() + T, T, longer.i32() + T);
  const Tensor full = model.features(longer, {}).value();  // [1, 2T, C]
  const int64_t C = full.dim(2);
  Tensor row1 = Tensor::empty({1, T, C});
  std::copy_n(seg.f32() + T * C, T * C, row1.f32());
  EXPECT_LT(max_rel_diff(row1, full, T), 1e-4);
}

TEST(Memory, AbsolutePositionsAndRotaryAreRefused) {
  for (PosMethod pos : {PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope}) {
    try {
      TransformerLM model(small_config(pos, 8));
      FAIL() << pos_method_name(pos) << " accepted --mem-len";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find("--mem-len"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(TransformerLM(small_config(PosMethod::Alibi, 0)).new_segment_state(SegmentUse::Training), nullptr);
}

TEST(Memory, ABatchOfAnotherSizeIsAUsageError) {
  TransformerLM model(small_config(PosMethod::Alibi, 8));
  model.init(1);
  autograd::NoGradGuard no_grad;
  auto state = model.new_segment_state(SegmentUse::Training);
  model.features(random_tokens(2, 4, 1), {.state = state.get()});
  try {
    model.features(random_tokens(3, 4, 2), {.state = state.get()});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("streams"), std::string::npos) << e.what();
  }
}

TEST(Memory, SaveLoadRoundTripContinuesIdentically) {
  TransformerLM model(small_config(PosMethod::Alibi, 5));
  model.init(2);
  autograd::NoGradGuard no_grad;
  auto a = model.new_segment_state(SegmentUse::Training);
  model.features(random_tokens(2, 4, 1), {.state = a.get()});
  model.features(random_tokens(2, 4, 2), {.state = a.get()});
  auto b = model.new_segment_state(SegmentUse::Training);
  b->load(a->save());
  EXPECT_EQ(b->kept(), 5);
  EXPECT_EQ(b->position(), 8);
  const Tensor next = random_tokens(2, 4, 3);
  const Tensor ya = model.features(next, {.state = a.get()}).value();
  const Tensor yb = model.features(next, {.state = b.get()}).value();
  ASSERT_EQ(ya.shape(), yb.shape());
  EXPECT_EQ(std::memcmp(ya.bytes(), yb.bytes(), ya.nbytes()), 0);
}

}  // namespace
}  // namespace stretch::models
