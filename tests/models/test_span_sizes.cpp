// tests/models/test_span_sizes.cpp — Adaptive Span's scalar arithmetic
// (models/adaptive_span/span_sizes.h) against values derived by hand from REFERENCE §5.1-5.4 and
// the §8 conformance list (mask at z = 0, R = 32; trim_len and cache_size 8128 / 128 at L = 8192).
// Every expected number is worked out in the comment next to it, never taken from the code.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "models/adaptive_span/span_sizes.h"

namespace stretch::models::adaptive_span {
namespace {

constexpr SpanShape kEnwik8{.attn_span = 8192, .ramp = 32};  // the seed's --attn-span 8192, R default
constexpr SpanShape kSmall{.attn_span = 1024, .ramp = 32};   // AdaptiveSpanSmallConfig

// §8: m_z(d) = clamp((R + z·L − (d−1))/R, 0, 1) at z = 0, R = 32: (32 − (d−1))/32.
TEST(SpanSizes, SoftMaskAtZeroSpanConformance) {
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 1), 1.0);           // (32 − 0)/32 = 1
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 2), 31.0 / 32.0);   // (32 − 1)/32
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 17), 0.5);          // (32 − 16)/32
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 32), 1.0 / 32.0);   // (32 − 31)/32
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 33), 0.0);          // (32 − 32)/32 = 0
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 34), 0.0);          // −1/32 clamps to 0
  EXPECT_EQ(soft_mask(kEnwik8, 0.0, 8192), 0.0);
}

TEST(SpanSizes, SoftMaskMovesWithZ) {
  // L = 64, R = 32, z = 0.5: z·L = 32, m = (64 − (d−1))/32: 1 up to d = 33, 0.5 at d = 49, 0 at d = 65.
  const SpanShape s{.attn_span = 64, .ramp = 32};
  EXPECT_EQ(soft_mask(s, 0.5, 1), 1.0);    // 64/32 = 2 clamps to 1
  EXPECT_EQ(soft_mask(s, 0.5, 33), 1.0);   // 32/32
  EXPECT_EQ(soft_mask(s, 0.5, 49), 0.5);   // 16/32
  EXPECT_EQ(soft_mask(s, 0.5, 64), 1.0 / 32.0);
  // z = 1 at L = 8192: (32 + 8192 − (d−1))/32 ≥ 1 for every d ≤ 8192: the whole span, unmasked.
  EXPECT_EQ(soft_mask(kEnwik8, 1.0, 8192), 1.0);  // (32 + 8192 − 8191)/32 = 33/32 → 1
}

TEST(SpanSizes, SoftMaskDerivativeIsLOverROnTheClosedRamp) {
  // ∂/∂z (R + z·L − (d−1))/R = L/R = 8192/32 = 256 where the unclamped value is in [0, 1].
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.0, 17), 256.0);  // 0.5: inside
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.0, 1), 256.0);   // exactly 1: torch's clamp passes it
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.0, 33), 256.0);  // exactly 0: passes too
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.0, 34), 0.0);    // −1/32: clamped
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.01, 1), 0.0);    // (32 + 81.92)/32 > 1: clamped
  // A finite difference of soft_mask agrees inside the ramp: z = 0.001 at d = 20,
  // value (32 + 8.192 − 19)/32 = 0.66225, in (0, 1), so the slope is 256.
  const double h = 1e-6;
  const double fd = (soft_mask(kEnwik8, 0.001 + h, 20) - soft_mask(kEnwik8, 0.001 - h, 20)) / (2 * h);
  EXPECT_NEAR(fd, 256.0, 1e-6);
  EXPECT_EQ(soft_mask_dz(kEnwik8, 0.001, 20), 256.0);
}

TEST(SpanSizes, SpanSizeIsCeilPlusRampClamped) {
  EXPECT_EQ(span_size(kEnwik8, 0.0), 32);       // ceil(0) + 32
  EXPECT_EQ(span_size(kEnwik8, 0.5), 4128);     // 4096 + 32
  EXPECT_EQ(span_size(kEnwik8, 1.0), 8192);     // 8192 + 32 clamps to L
  EXPECT_EQ(span_size(kSmall, 0.001), 34);      // ceil(1.024) = 2, + 32
  EXPECT_EQ(span_size(kEnwik8, -0.1), 0);       // unclamped z: ceil(−819.2) = −819, + 32 < 0 → 0
  EXPECT_EQ(span_size(kEnwik8, -0.001), 24);    // ceil(−8.192) = −8, + 32
}

// §8 / §5.2: L = 8192, z = 0: max_size 32, trim_len = 64·floor(min(8191, 8160)/64) = 64·127 =
// 8128, cache_size = min(8192, 8192 − 8128 + 64) = 128, span S = 64.
TEST(SpanSizes, TrimLenAndCacheSizeConformance) {
  const int64_t max_size = span_size(kEnwik8, 0.0);
  ASSERT_EQ(max_size, 32);
  const int64_t t = trim_len(kEnwik8, max_size);
  EXPECT_EQ(t, 8128);
  EXPECT_EQ(cache_size(kEnwik8, t), 128);
  EXPECT_EQ(trim_plan(kEnwik8, t, 128).span, 64);
}

TEST(SpanSizes, TrimLenEdges) {
  EXPECT_EQ(trim_len(kEnwik8, 8192), 0);     // min(8191, 0) = 0
  EXPECT_EQ(trim_len(kEnwik8, 0), 8128);     // min(8191, 8192) = 8191 → 64·127
  EXPECT_EQ(trim_len(kEnwik8, 4128), 4032);  // 8192 − 4128 = 4064 → 64·63 = 4032
  EXPECT_EQ(cache_size(kEnwik8, 0), 8192);   // min(8192, 8256)
  EXPECT_EQ(cache_size(kEnwik8, 4032), 4224);  // 8192 − 4032 + 64
  // Small config at z = 0: min(1023, 992) = 992 → 64·15 = 960; cache min(1024, 128) = 128.
  EXPECT_EQ(trim_len(kSmall, 32), 960);
  EXPECT_EQ(cache_size(kSmall, 960), 128);
  // L below the granularity never trims: L = 40: min(39, 8) = 8 → 0; cache min(40, 104) = 40.
  const SpanShape tiny{.attn_span = 40, .ramp = 32};
  EXPECT_EQ(trim_len(tiny, 32), 0);
  EXPECT_EQ(cache_size(tiny, 0), 40);
}

TEST(SpanSizes, TrimPlanDropsOrPadsTheCacheFront) {
  // Steady state at L = 8192, z = 0: a 128-row cache, trim 8128: extra = 8128 − (8192 − 128) = 64
  // rows dropped, 64 kept = S; key_pe from column 8128 (its last 64 columns).
  TrimPlan p = trim_plan(kEnwik8, 8128, 128);
  EXPECT_EQ(p.drop_front, 64);
  EXPECT_EQ(p.pad_front, 0);
  EXPECT_EQ(p.key_pe_start, 8128);
  EXPECT_EQ(p.span, 64);
  // The span grew (trim 8064, S = 128) while the cache holds 64 rows: extra = 8064 − 8128 = −64:
  // 64 zero rows in front, 64 + 64 = 128 = S.
  p = trim_plan(kEnwik8, 8064, 64);
  EXPECT_EQ(p.drop_front, 0);
  EXPECT_EQ(p.pad_front, 64);
  EXPECT_EQ(p.span, 128);
  // Exactly the right length: 128 rows for S = 128: extra = 8064 − 8064 = 0.
  p = trim_plan(kEnwik8, 8064, 128);
  EXPECT_EQ(p.drop_front + p.pad_front, 0);
  // No trimming (trim 0): the full key_pe, S = L; a full cache of L rows is kept whole.
  p = trim_plan(kEnwik8, 0, 8192);
  EXPECT_EQ(p.drop_front + p.pad_front, 0);
  EXPECT_EQ(p.key_pe_start, 0);
  EXPECT_EQ(p.span, 8192);
}

TEST(SpanSizes, NextCacheTakesTheLastRows) {
  // cache 128 ≤ block 512: the last 128 rows of the layer input.
  NextCache n = next_cache(128, 128, 512);
  EXPECT_EQ(n.from_cache, 0);
  EXPECT_EQ(n.from_input, 128);
  // cache 1024 > block 512 with a 128-row old cache: all 128 old rows (Python's old[:, −512:] of a
  // 128-row tensor is the whole tensor) + 512 → 640 rows, shorter than 1024.
  n = next_cache(1024, 128, 512);
  EXPECT_EQ(n.from_cache, 128);
  EXPECT_EQ(n.from_input, 512);
  // A long old cache gives exactly cache_size: 512 + 512.
  n = next_cache(1024, 2000, 512);
  EXPECT_EQ(n.from_cache, 512);
  EXPECT_EQ(n.from_input, 512);
  // cache == block: the whole block.
  n = next_cache(512, 700, 512);
  EXPECT_EQ(n.from_cache, 0);
  EXPECT_EQ(n.from_input, 512);
}

TEST(SpanSizes, SpanLossIsLTimesMeanZ) {
  const std::vector<float> z{0.0f, 0.5f, 0.25f, 0.25f};  // mean 0.25
  EXPECT_EQ(span_loss(kEnwik8, z), 2048.0);              // 8192·0.25
  const std::vector<float> one{0.125f};                   // adapt_span_layer: one z per layer
  EXPECT_EQ(span_loss(kSmall, one), 128.0);               // 1024·0.125
}

TEST(SpanSizes, RejectsImpossibleSizes) {
  EXPECT_THROW(soft_mask(kEnwik8, 0.0, 0), Error);  // distance 0 is never attended
  EXPECT_THROW(trim_len(kEnwik8, 8193), Error);
  EXPECT_THROW(cache_size(kEnwik8, 8192), Error);
  EXPECT_THROW(span_size({.attn_span = 0, .ramp = 32}, 0.0), Error);
  EXPECT_THROW(span_size({.attn_span = 64, .ramp = 0}, 0.0), Error);
}

}  // namespace
}  // namespace stretch::models::adaptive_span
