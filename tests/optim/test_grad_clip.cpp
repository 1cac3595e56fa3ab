// tests/optim/test_grad_clip.cpp — fairseq's gradient clipping (REFERENCE §3.2): the global
// norm over all grads, coef = min(1, max_norm/(norm + 1e-6)), max_norm 0 = no clipping;
// scaling, the non-finite check, and independence from the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "optim/grad_clip.h"

namespace stretch::optim {
namespace {

struct Grads {
  std::vector<std::vector<float>> g;
  std::vector<OptimParam> views() {
    std::vector<OptimParam> v;
    for (size_t i = 0; i < g.size(); ++i) {
      std::string name = "p";  // (not "p" + to_string: GCC 12 warns falsely, -Wrestrict)
      name += std::to_string(i);
      v.push_back({name, nullptr, g[i].data(), static_cast<int64_t>(g[i].size())});
    }
    return v;
  }
};

TEST(ClipGradNorm, NormAndCoefficientByHand) {
  // ‖[3, 4, 12]‖ = 13 over two tensors.
  Grads gr{{{3.0f, 4.0f}, {12.0f}, {}}};
  auto v = gr.views();
  const double norm = clip_grad_norm(v, 1.0);
  EXPECT_DOUBLE_EQ(norm, 13.0);
  // coef = 1/(13 + 1e-6) = 0.0769230710...; grads scaled by it (one fp32 rounding each).
  const double coef = 1.0 / (13.0 + 1e-6);
  EXPECT_NEAR(clip_coefficient(13.0, 1.0), coef, 1e-17);
  EXPECT_NEAR(gr.g[0][0], 3 * coef, 1e-7);
  EXPECT_NEAR(gr.g[0][1], 4 * coef, 1e-7);
  EXPECT_NEAR(gr.g[1][0], 12 * coef, 1e-7);
  // After clipping the norm is max_norm·13/(13 + 1e-6).
  EXPECT_NEAR(grad_norm(v), 13.0 * coef, 1e-6);
}

TEST(ClipGradNorm, NoClippingBelowMaxOrWithZero) {
  Grads gr{{{3.0f, 4.0f}}};
  auto v = gr.views();
  EXPECT_DOUBLE_EQ(clip_grad_norm(v, 0.0), 5.0);  // 0 = report only
  EXPECT_EQ(gr.g[0][0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(v, 10.0), 5.0);  // coef = min(1, 10/5) = 1
  EXPECT_EQ(gr.g[0][1], 4.0f);
  EXPECT_EQ(clip_coefficient(5.0, 0.0), 1.0);
  EXPECT_EQ(clip_coefficient(5.0, 10.0), 1.0);
  // The ALiBi recipe's 0.1 with a norm of 0.1 clips by 0.1/(0.1 + 1e-6) (just below 1).
  EXPECT_NEAR(clip_coefficient(0.1, 0.1), 0.1 / 0.100001, 1e-17);
}

// A NaN or ±inf gradient anywhere makes the norm non-finite (the trainer's skip signal, in place
// of a separate scan) and leaves the gradients alone; finite gradients give a finite norm.
TEST(ClipGradNorm, NonFiniteIsReportedAndGradsLeftAlone) {
  Grads gr{{{1.0f, std::numeric_limits<float>::quiet_NaN()}, {2.0f}}};
  auto v = gr.views();
  EXPECT_FALSE(std::isfinite(grad_norm(v)));
  EXPECT_TRUE(std::isnan(clip_grad_norm(v, 0.1)));
  EXPECT_EQ(gr.g[1][0], 2.0f);
  gr.g[0][1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(std::isfinite(grad_norm(gr.views())));
  EXPECT_FALSE(std::isfinite(scale_and_clip_grads(gr.views(), 0.5, 0.1)));
  EXPECT_EQ(gr.g[1][0], 2.0f);
  gr.g[0][1] = 0.5f;
  EXPECT_TRUE(std::isfinite(grad_norm(gr.views())));
}

// The one-pass form the trainer uses: ‖[3, 4, 12]‖ = 13, factor 1/4 -> gnorm 3.25, clip to 1:
// grads ·= (1/4)·1/(3.25 + 1e-6), compared with the two-call form (one rounding apart: 1 ulp).
TEST(ScaleAndClipGrads, MatchesMultiplyThenClip) {
  Grads a{{{3.0f, 4.0f}, {12.0f}, {}}}, b = a;
  const double gnorm = scale_and_clip_grads(a.views(), 0.25, 1.0);
  EXPECT_DOUBLE_EQ(gnorm, 3.25);
  multiply_grads(b.views(), 0.25);
  EXPECT_DOUBLE_EQ(clip_grad_norm(b.views(), 1.0), 3.25);
  for (size_t t = 0; t < a.g.size(); ++t)
    for (size_t i = 0; i < a.g[t].size(); ++i) EXPECT_NEAR(a.g[t][i], b.g[t][i], 2e-7 * std::abs(b.g[t][i]));
  EXPECT_NEAR(a.g[1][0], 12.0 * 0.25 / (3.25 + 1e-6), 1e-6);
  // No clipping (max_norm 0): only the factor.
  Grads c{{{4.0f, -8.0f}}};
  EXPECT_DOUBLE_EQ(scale_and_clip_grads(c.views(), 0.25, 0.0), 0.25 * std::sqrt(80.0));
  EXPECT_EQ(c.g[0][0], 1.0f);
  EXPECT_EQ(c.g[0][1], -2.0f);
  // A NaN gradient: non-finite norm, gradients untouched.
  Grads d{{{1.0f, std::numeric_limits<float>::quiet_NaN()}, {2.0f}}};
  EXPECT_TRUE(std::isnan(scale_and_clip_grads(d.views(), 0.5, 0.1)));
  EXPECT_EQ(d.g[0][0], 1.0f);
  EXPECT_EQ(d.g[1][0], 2.0f);
}

TEST(MultiplyGrads, ScalesEveryGrad) {
  // fairseq's step 2: grads ·= world_size / sample_size; here 1/4.
  Grads gr{{{4.0f, -8.0f}, {1.0f}}};
  multiply_grads(gr.views(), 0.25);
  EXPECT_EQ(gr.g[0][0], 1.0f);
  EXPECT_EQ(gr.g[0][1], -2.0f);
  EXPECT_EQ(gr.g[1][0], 0.25f);
}

TEST(ClipGradNorm, LargeAndManyTensorsSameForAnyThreadCount) {
  Grads gr;
  gr.g.emplace_back(300001);
  for (size_t i = 0; i < gr.g[0].size(); ++i) gr.g[0][i] = static_cast<float>(std::sin(0.37 * i));
  for (int k = 0; k < 50; ++k) gr.g.emplace_back(17 + k, 0.01f * k);
  // Reference: one plain double loop over everything.
  double ref = 0;
  for (auto& t : gr.g)
    for (float x : t) ref += static_cast<double>(x) * x;
  ref = std::sqrt(ref);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double n1 = grad_norm(gr.views());
  omp_set_num_threads(4);
  const double n4 = grad_norm(gr.views());
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&n1, &n4, sizeof n1), 0) << n1 << " vs " << n4;
  // Summation order differs from the plain loop: relative 1e-12 bounds it for 3e5 terms.
  EXPECT_NEAR(n1, ref, ref * 1e-12);
}

}  // namespace
}  // namespace stretch::optim
