// The tape: gradients of a composed function against central finite differences, accumulation
// across backward passes (what --update-freq relies on), and NoGradGuard recording nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"

namespace stretch::autograd {
namespace {

Var random_param(Shape s, Rng& rng, float scale = 0.5f) {
  Var v(Tensor::empty(std::move(s)), true);
  for (int64_t i = 0; i < v.numel(); ++i) v.data()[i] = rng.uniform(-scale, scale);
  return v;
}

struct Net {
  Var w1, b1, ln_w, ln_b, w2;
  Tensor targets;
  explicit Net(Rng& rng)
      : w1(random_param({6, 5}, rng)), b1(random_param({6}, rng)), ln_w(random_param({6}, rng)),
        ln_b(random_param({6}, rng)), w2(random_param({7, 6}, rng)), targets(Tensor::empty({4}, DType::I32)) {
    for (int i = 0; i < 4; ++i) targets.i32()[i] = i == 2 ? 1 : 2 + i;  // row 2 is ignored (pad 1)
  }
  // loss = CE(linear(gelu(LN(linear(x)) + linear(x))), targets), summed over non-ignored rows
  Var loss(const Var& x) {
    Var h = linear(x, w1, b1);
    Var y = add(layer_norm(h, ln_w, ln_b), scale(h, 0.5f));
    Var logits = linear(activation(y, ops::Activation::Gelu), w2, Var());
    return cross_entropy(logits, targets, 1, ops::Reduction::Sum);
  }
};

// float32 central differences: with h = 1e-2 the truncation error is O(h²·f''') ~ 1e-4 and
// the rounding error ~ eps·|f|/h ~ 1e-5, so 2e-3 relative to max(|g|, 1) is a safe bound
// that a wrong gradient (typically off by O(1)) cannot pass.
TEST(Tape, ComposedGradientsMatchFiniteDifferences) {
  Rng rng(11);
  Net net(rng);
  Var x = random_param({4, 5}, rng, 1.0f);
  Var loss = net.loss(x);
  tape().backward(loss);
  for (Var* p : {&net.w1, &net.b1, &net.ln_w, &net.ln_b, &net.w2, &x}) {
    for (int64_t i = 0; i < p->numel(); ++i) {
      NoGradGuard no_grad;
      const float keep = p->data()[i];
      const float h = 1e-2f;
      p->data()[i] = keep + h;
      const double up = net.loss(x).value().f32()[0];
      p->data()[i] = keep - h;
      const double down = net.loss(x).value().f32()[0];
      p->data()[i] = keep;
      const double fd = (up - down) / (2 * h);
      const double g = p->grad().f32()[i];
      ASSERT_NEAR(g, fd, 2e-3 * std::max(1.0, std::abs(fd))) << "element " << i;
    }
  }
}

TEST(Tape, GradientsAccumulateAcrossBackwardPasses) {
  Rng rng(5);
  Net net(rng);
  Var x = random_param({4, 5}, rng, 1.0f);
  tape().backward(net.loss(x));
  Tensor once = net.w1.grad().clone();
  tape().backward(net.loss(x));
  for (int64_t i = 0; i < once.numel(); ++i) ASSERT_FLOAT_EQ(net.w1.grad().f32()[i], 2 * once.f32()[i]);
  net.w1.zero_grad();
  for (int64_t i = 0; i < once.numel(); ++i) ASSERT_EQ(net.w1.grad().f32()[i], 0.f);
}

TEST(Tape, NoGradRecordsNothingAndTapeIsClearedAfterBackward) {
  Rng rng(2);
  Net net(rng);
  Var x = random_param({4, 5}, rng, 1.0f);
  {
    NoGradGuard no_grad;
    Var l = net.loss(x);
    EXPECT_EQ(tape().size(), 0u);
    EXPECT_FALSE(l.requires_grad());
  }
  Var l = net.loss(x);
  EXPECT_GT(tape().size(), 5u);
  tape().backward(l);
  EXPECT_EQ(tape().size(), 0u);
  EXPECT_THROW(tape().backward(net.w1), Error);  // not a scalar
  tape().clear();
}

}  // namespace
}  // namespace stretch::autograd
