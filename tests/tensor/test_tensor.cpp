#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tensor/pool.h"
#include "tensor/tensor.h"

namespace stretch {

TEST(Tensor, ShapeViewClone) {
  Tensor t = Tensor::full({2, 3, 4}, 1.5f);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.shape(), Shape({2, 3, 4}));
  Tensor v = t.view({6, 4});
  v.f32()[5] = 7.f;
  EXPECT_EQ(t.f32()[5], 7.f);  // views share the buffer
  Tensor c = t.clone();
  c.f32()[5] = 0.f;
  EXPECT_EQ(t.f32()[5], 7.f);  // clones do not
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.i32(), Error);
}

// slice_rows is a view: same buffer at a row offset, writes through, bounds checked.
TEST(Tensor, SliceRowsIsAView) {
  Tensor t = Tensor::zeros({4, 3});
  for (int64_t i = 0; i < 12; ++i) t.f32()[i] = static_cast<float>(i);
  Tensor s = t.slice_rows(1, 2);
  EXPECT_EQ(s.shape(), Shape({2, 3}));
  EXPECT_EQ(s.f32(), t.f32() + 3);
  EXPECT_EQ(s.f32()[5], 8.f);
  s.fill_(-1.f);
  EXPECT_EQ(t.f32()[2], 2.f);
  EXPECT_EQ(t.f32()[3], -1.f);
  EXPECT_EQ(t.f32()[8], -1.f);
  EXPECT_EQ(t.f32()[9], 9.f);
  EXPECT_EQ(t.slice_rows(4, 0).numel(), 0);
  EXPECT_THROW(t.slice_rows(3, 2), Error);
}

TEST(Tensor, Bf16RoundTrip) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even -> 1.0
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3·2^-8 is halfway between 1+2^-7 and 1+2^-6 (odd lower) -> rounds up to 1+2^-6
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(nan))));
}

// The pool must serve a repeated pattern of allocations without new system allocations:
// this is what makes a training step allocation-free after the first.
TEST(Pool, SteadyStateMakesNoSystemAllocation) {
  auto step = [] {
    Tensor a = Tensor::empty({128, 256});
    Tensor b = Tensor::empty({128, 1024});
    Tensor c = Tensor::empty({7});
    a.fill_(1.f);
  };
  step();
  uint64_t before = pool_stats().system_allocs;
  for (int i = 0; i < 10; ++i) step();
  EXPECT_EQ(pool_stats().system_allocs, before);
  EXPECT_GT(pool_stats().reuses, 0u);
}

}  // namespace stretch
