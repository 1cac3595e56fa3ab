// autograd::checkpoint (autograd/checkpoint.h): a function recorded as one entry that recomputes
// its forward in backward. Oracles: the same function recorded op by op (whose gradients
// test_tape checks against finite differences), bit for bit, dropout on; a GradReady watch
// (data parallelism) must still report every parameter once its gradient is final; nothing is
// recorded without grad mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/grad_ready.h"
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
  Var w_in, ln_w, ln_b, w1, b1, w2;  // w_in [C, C0]; the block: LN, w1 [F, C], w2 [C, F]; head: w_out
  Var w_out;
  Tensor x0, targets;
  explicit Net(Rng& rng)
      : w_in(random_param({8, 5}, rng)), ln_w(random_param({8}, rng)), ln_b(random_param({8}, rng)),
        w1(random_param({12, 8}, rng)), b1(random_param({12}, rng)), w2(random_param({8, 12}, rng)),
        w_out(random_param({7, 8}, rng)), x0(Tensor::empty({2, 3, 5})), targets(Tensor::empty({6}, DType::I32)) {
    for (int64_t i = 0; i < x0.numel(); ++i) x0.f32()[i] = rng.uniform(-1.f, 1.f);
    for (int i = 0; i < 6; ++i) targets.i32()[i] = i == 4 ? 1 : 2 + i % 5;
  }
  std::vector<Var> params() const { return {w_in, ln_w, ln_b, w1, b1, w2, w_out}; }
  // x + drop(w2 · drop(relu(w1 · LN(x) + b1))), two dropout streams
  Var block(const Var& x) const {
    Var h = linear(layer_norm(x, ln_w, ln_b), w1, b1, ops::LinearEpilogue::Relu);
    h = dropout(h, {.p = 0.3f, .seed = 9, .stream = 1});
    return dropout_add(x, linear(h, w2, Var()), {.p = 0.25f, .seed = 9, .stream = 2});
  }
  Var loss(Activations a) const {
    Var x = linear(Var(x0), w_in, Var());  // [2, 3, 8]
    for (int layer = 0; layer < 2; ++layer)
      x = a == Activations::Keep ? block(x) : checkpoint(x, [this](const Var& in) { return block(in); });
    return cross_entropy(linear(x, w_out, Var()), targets, 1, ops::Reduction::Sum);
  }
  std::vector<std::vector<float>> grads() const {
    std::vector<std::vector<float>> g;
    for (const Var& p : params()) g.emplace_back(p.grad().f32(), p.grad().f32() + p.numel());
    return g;
  }
  void zero_grad() const {
    for (const Var& p : params()) p.zero_grad();
  }
};

TEST(Checkpoint, GradientsEqualTheDirectRecordingBitwise) {
  Rng rng(3);
  Net net(rng);
  tape().clear();
  Var l1 = net.loss(Activations::Keep);
  const size_t direct_entries = tape().size();
  tape().backward(l1);
  const auto want = net.grads();
  net.zero_grad();
  Var l2 = net.loss(Activations::Recompute);
  EXPECT_EQ(tape().size(), direct_entries - 2 * 5 + 2);  // each block's 5 ops -> one entry
  tape().backward(l2);
  const auto got = net.grads();
  EXPECT_EQ(std::memcmp(l1.data(), l2.data(), sizeof(float)), 0) << l1.data()[0] << " vs " << l2.data()[0];
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0) << "parameter " << i;
    double norm = 0;
    for (float g : want[i]) norm += std::abs(g);
    EXPECT_GT(norm, 0) << "parameter " << i;
  }
  // Accumulation (--update-freq): a second backward adds the same gradient again, as direct does.
  tape().backward(net.loss(Activations::Recompute));
  const auto twice = net.grads();
  net.zero_grad();
  tape().backward(net.loss(Activations::Keep));
  tape().backward(net.loss(Activations::Keep));
  const auto twice_direct = net.grads();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::memcmp(twice[i].data(), twice_direct[i].data(), want[i].size() * sizeof(float)), 0) << i;
}

TEST(Checkpoint, GradReadyReportsEachParameterWhenFinal) {
  Rng rng(4);
  Net net(rng);
  const auto params = net.params();
  net.zero_grad();  // allocate every gradient buffer (the trainer's bucketed all-reduce has them)
  for (const Var& p : params) (void)p.grad();
  std::vector<LeafGrad> leaves;
  for (const Var& p : params) leaves.push_back({.grad = p.grad().f32(), .numel = p.numel()});
  std::map<size_t, std::vector<float>> at_report;  // leaf -> its gradient when reported
  GradReady ready(
      leaves, [&](size_t leaf) { at_report[leaf] = std::vector<float>(leaves[leaf].grad, leaves[leaf].grad + leaves[leaf].numel); },
      nullptr);
  {
    GradWatchScope watch(&ready);
    tape().clear();
    tape().backward(net.loss(Activations::Recompute));
  }
  ASSERT_EQ(at_report.size(), params.size());
  const auto final_grads = net.grads();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(at_report.at(i), final_grads[i]) << "parameter " << i << " was reported before its gradient was final";
}

TEST(Checkpoint, NothingRecordedWithoutGradMode) {
  Rng rng(5);
  Net net(rng);
  tape().clear();
  NoGradGuard no_grad;
  Var l = net.loss(Activations::Recompute);
  EXPECT_EQ(tape().size(), 0u);
  EXPECT_TRUE(std::isfinite(l.data()[0]));
}

}  // namespace
}  // namespace stretch::autograd
