// train/ema.h: the update rule on values worked out by hand, and fairseq's schedule of EMA steps
// (decay 0 before --ema-start-update, one step every --ema-update-freq updates, the counter carried
// by the caller). tests/fairseq/check_ema.py checks the same against fairseq's own EMA class.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "train/ema.h"

namespace stretch::train {
namespace {

TEST(Ema, UpdateRuleOnValuesWorkedOutByHand) {
  // decay 0.5: (1·0.5) + 3·0.5 = 2; decay 0: the weight; decay 1: the average unchanged.
  std::vector<float> avg = {1.f, -4.f, 8.f};
  const std::vector<float> w = {3.f, 2.f, 8.f};
  ema_update(avg.data(), w.data(), 3, 0.5);
  EXPECT_EQ(avg, (std::vector<float>{2.f, -1.f, 8.f}));
  ema_update(avg.data(), w.data(), 3, 0.0);
  EXPECT_EQ(avg, w);
  std::vector<float> keep = {0.25f, 7.f, -1.f};
  ema_update(keep.data(), w.data(), 3, 1.0);
  EXPECT_EQ(keep, (std::vector<float>{0.25f, 7.f, -1.f}));
  // decay 0.9 on avg 1, w 0: exactly float(0.9) (the product's rounding; w·alpha adds 0).
  float one = 1.f;
  const float zero = 0.f;
  ema_update(&one, &zero, 1, 0.9);
  EXPECT_EQ(one, 0.9f);
  // The sum is one fused multiply-add, as torch's add_(alpha) (its result for these values, at tensor sizes
  // 1, 16, 17 and 64 alike, is 0x1.095042p+0); rounding w·alpha first would give 0x1.095044p+0.
  float a = 0x1.308abep+0f;
  const float w2 = -0x1.5ef848p-2f;
  ema_update(&a, &w2, 1, 0.9);
  EXPECT_EQ(a, 0x1.095042p+0f);
}

TEST(Ema, StepsEveryUpdateFreqWithDecayZeroBeforeTheStart) {
  std::vector<float> value = {10.f};
  std::vector<float> grad = {0.f};
  const std::vector<optim::OptimParam> params = {{"p", value.data(), grad.data(), 1}};
  const EmaSettings s{.store = true, .decay = 0.5, .start_update = 3, .update_freq = 2};
  Ema ema;
  int64_t counter = 0;
  EXPECT_FALSE(ema.built());
  // Before any step, a save holds the weights (fairseq builds the average to save it).
  EXPECT_EQ(ema.save(params).at(0).second.f32()[0], 10.f);
  // Update 1: the average is built from the weights (10); the counter reaches 1 < 2: no step.
  ema.step(params, 1, s, counter);
  EXPECT_TRUE(ema.built());
  EXPECT_EQ(ema.last_decay(), 0.0);
  EXPECT_EQ(counter, 1);
  value[0] = 20.f;  // update 2: a step with decay 0 (2 < 3): the average is the weight
  ema.step(params, 2, s, counter);
  EXPECT_EQ(counter, 0);
  EXPECT_EQ(ema.save(params).at(0).second.f32()[0], 20.f);
  value[0] = 40.f;  // update 3: decay 0.5 from now on, but no step (counter 1)
  ema.step(params, 3, s, counter);
  EXPECT_EQ(ema.last_decay(), 0.5);
  EXPECT_EQ(ema.save(params).at(0).second.f32()[0], 20.f);
  value[0] = 60.f;  // update 4: 20·0.5 + 60·0.5 = 40
  ema.step(params, 4, s, counter);
  const NamedTensors saved = ema.save(params);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].first, "ema.p");
  EXPECT_EQ(saved[0].second.f32()[0], 40.f);
  // Loading it back; a file without ema.* reports false; a wrong size names the tensor.
  Ema again;
  EXPECT_TRUE(again.load(saved, params, "x.pt"));
  EXPECT_EQ(again.save(params).at(0).second.f32()[0], 40.f);
  EXPECT_FALSE(again.load({{"p", saved[0].second}}, params, "x.pt"));
  NamedTensors wrong;
  wrong.emplace_back("ema.p", Tensor::zeros(Shape{2}));
  try {
    again.load(wrong, params, "x.pt");
    FAIL() << "a wrong-sized average loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'ema.p'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stretch::train
