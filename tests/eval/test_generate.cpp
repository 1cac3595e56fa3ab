// generate (eval/generate.h): sample_from_logits on crafted logits with the expected
// distribution computed by hand, greedy/top-k/top-p/temperature semantics, determinism from the
// seed, and cached decoding giving the tokens a full forward pass gives at every step.
//
// Frequencies: N = 20,000 draws from a fixed seed (deterministic, never flaky); a frequency
// p̂ of a probability p has standard deviation sqrt(p(1−p)/N) <= 0.0036, and we allow 0.02
// (more than 5 sigma). A wrong rule (top-p excluding the crossing token, temperature applied as
// a multiplier, no renormalisation after top-k) moves some frequency by >= 0.1.
#include <gtest/gtest.h>

#include <cmath>

#include "data/dictionary.h"
#include "eval/generate.h"
#include "eval_test_util.h"

namespace stretch::eval {
namespace {

using models::PosMethod;

std::vector<double> frequencies(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed,
                                const std::vector<int32_t>& banned = {}, int draws = 20000) {
  Rng rng(seed, 1);
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i)
    f[static_cast<size_t>(sample_from_logits(logits.data(), static_cast<int64_t>(logits.size()), p, rng, banned))] +=
        1.0 / draws;
  return f;
}

// logits = ln(0.5, 0.3, 0.15, 0.05): softmax gives back those probabilities.
const std::vector<float> kLogits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};

void expect_distribution(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0.0) EXPECT_EQ(got[i], 0.0) << what << ": id " << i << " must never be drawn";
    else EXPECT_NEAR(got[i], want[i], 0.02) << what << ": id " << i;
  }
}

TEST(SampleFromLogits, PlainSamplingFollowsTheSoftmax) {
  expect_distribution(frequencies(kLogits, {.temperature = 1.f}, 1), {0.5, 0.3, 0.15, 0.05}, "T 1");
}

TEST(SampleFromLogits, TemperatureDividesTheLogits) {
  // [0, ln 4]: T = 1 -> 1/5, 4/5; T = 2 -> weights 1, 2 -> 1/3, 2/3; T = 0.5 -> 1, 16 -> 1/17, 16/17.
  const std::vector<float> l = {0.f, std::log(4.f)};
  expect_distribution(frequencies(l, {.temperature = 1.f}, 2), {0.2, 0.8}, "T 1");
  expect_distribution(frequencies(l, {.temperature = 2.f}, 3), {1.0 / 3, 2.0 / 3}, "T 2");
  expect_distribution(frequencies(l, {.temperature = 0.5f}, 4), {1.0 / 17, 16.0 / 17}, "T 0.5");
}

TEST(SampleFromLogits, TopKRenormalisesTheKBest) {
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_k = 2}, 5), {0.625, 0.375, 0, 0}, "top-k 2");
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_k = 3}, 6), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0},
                      "top-k 3");
}

TEST(SampleFromLogits, TopPKeepsTheTokenThatCrossesTheThreshold) {
  // Cumulative mass 0.5, 0.8, 0.95, 1.0.
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_p = 0.75f}, 7), {0.625, 0.375, 0, 0}, "top-p 0.75");
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_p = 0.9f}, 8), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0},
                      "top-p 0.9");
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_p = 0.45f}, 9), {1, 0, 0, 0}, "top-p 0.45");
  // Order of the logits does not matter: the same distribution over permuted ids.
  const std::vector<float> perm = {kLogits[3], kLogits[1], kLogits[0], kLogits[2]};
  expect_distribution(frequencies(perm, {.temperature = 1.f, .top_p = 0.75f}, 10), {0, 0.375, 0.625, 0},
                      "top-p 0.75 permuted");
}

TEST(SampleFromLogits, GreedyTopK1AndBannedIds) {
  Rng rng(1, 1);
  EXPECT_EQ(sample_from_logits(kLogits.data(), 4, {.temperature = 0.f}, rng, {}), 0);
  EXPECT_EQ(sample_from_logits(kLogits.data(), 4, {.temperature = 0.f}, rng, {0}), 1);
  // Ties: the lowest id.
  const std::vector<float> tie = {1.f, 3.f, 3.f, 0.f};
  EXPECT_EQ(sample_from_logits(tie.data(), 4, {.temperature = 0.f}, rng, {}), 1);
  // Greedy makes no draw: the rng is untouched.
  EXPECT_EQ(rng.offset(), 0u);
  // top-k 1 is greedy whatever the draw.
  expect_distribution(frequencies(kLogits, {.temperature = 1.f, .top_k = 1}, 11, {}, 2000), {1, 0, 0, 0}, "top-k 1");
  expect_distribution(frequencies(kLogits, {.temperature = 1.f}, 12, {0, 2}), {0, 0.3 / 0.35, 0, 0.05 / 0.35}, "banned");
}

TEST(SampleFromLogits, DeterministicFromTheRngState) {
  Rng a(42, 1), b(42, 1), c(43, 1);
  std::vector<int32_t> sa, sb, sc;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(sample_from_logits(kLogits.data(), 4, {.temperature = 1.f}, a, {}));
    sb.push_back(sample_from_logits(kLogits.data(), 4, {.temperature = 1.f}, b, {}));
    sc.push_back(sample_from_logits(kLogits.data(), 4, {.temperature = 1.f}, c, {}));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(Generate, BannedIdsAreSpecialsAndPaddingSymbols) {
  data::Dictionary d;
  d.add_symbol("a", 5);
  d.add_symbol("b", 3);
  d.finalize({.padding_factor = 8});  // 6 symbols -> 8: madeupword0000, madeupword0001
  ASSERT_EQ(d.size(), 8);
  EXPECT_EQ(banned_ids(d), (std::vector<int32_t>{0, 1, 3, 6, 7}));
}

// Greedy decoding with the KV cache gives, at every step, the token a full forward pass over
// the whole sequence so far gives (all six position methods).
class GenerateCached : public ::testing::TestWithParam<PosMethod> {};

TEST_P(GenerateCached, GreedyEqualsFullForwardEveryStep) {
  auto model = testing::tiny_model(GetParam(), 30);
  const std::vector<int32_t> context = {2, 7, 9, 11};
  const std::vector<int32_t> banned = {0, 1, 3};
  Rng rng(1, 1);
  const SamplingParams greedy{.max_len = 10, .temperature = 0.f};
  const std::vector<int32_t> got = generate_tokens(*model, context, greedy, rng, banned);
  ASSERT_EQ(got.size(), 10u);
  std::vector<int32_t> seq = context;
  autograd::NoGradGuard no_grad;
  for (int32_t step = 0; step < 10; ++step) {
    Tensor src = Tensor::empty({1, static_cast<int64_t>(seq.size())}, DType::I32);
    std::copy(seq.begin(), seq.end(), src.i32());
    Tensor logits = model->forward(src, {}).value();  // [1, T, V]
    const float* last = logits.f32() + (static_cast<int64_t>(seq.size()) - 1) * 30;
    int32_t best = -1;
    for (int32_t v = 0; v < 30; ++v)
      if (v != 0 && v != 1 && v != 3 && (best < 0 || last[v] > last[best])) best = v;
    EXPECT_EQ(got[static_cast<size_t>(step)], best) << "step " << step;
    seq.push_back(best);
  }
  // top-k 1 at temperature 1 is the same sequence; sampling is reproducible from the seed.
  Rng r1(7, 1), r2(7, 1), r3(8, 1);
  EXPECT_EQ(generate_tokens(*model, context, {.max_len = 10, .temperature = 1.f, .top_k = 1}, r1, banned), got);
  const SamplingParams sample{.max_len = 12, .temperature = 1.f};  // 4 + 12 within the learned table (16)
  Rng s1(7, 1), s2(7, 1), s3(8, 1);
  const auto a = generate_tokens(*model, context, sample, s1, banned);
  EXPECT_EQ(generate_tokens(*model, context, sample, s2, banned), a);
  EXPECT_NE(generate_tokens(*model, context, sample, s3, banned), a);
  for (int32_t t : a) EXPECT_TRUE(t != 0 && t != 1 && t != 3) << t;
}

INSTANTIATE_TEST_SUITE_P(AllPositions, GenerateCached,
                         ::testing::Values(PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope,
                                           PosMethod::T5, PosMethod::None),
                         [](const auto& info) { return std::string(models::pos_method_name(info.param)); });

TEST(Generate, StopsAfterTheStopToken) {
  auto model = testing::tiny_model(PosMethod::Alibi, 30);
  Rng rng(1, 1);
  const auto greedy = generate_tokens(*model, {2, 5}, {.max_len = 12, .temperature = 0.f}, rng, {0, 1, 3});
  const int32_t stop = greedy[3];
  const auto stopped = generate_tokens(*model, {2, 5}, {.max_len = 12, .temperature = 0.f, .stop_token = stop}, rng, {0, 1, 3});
  ASSERT_FALSE(stopped.empty());
  EXPECT_EQ(stopped.back(), stop);
  EXPECT_LE(stopped.size(), 4u);
  EXPECT_TRUE(std::equal(stopped.begin(), stopped.end(), greedy.begin()));
}

}  // namespace
}  // namespace stretch::eval
