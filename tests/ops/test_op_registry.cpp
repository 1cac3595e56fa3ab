// tests/ops/test_op_registry.cpp — fast vs reference over every registered case, and proof that
// the gate can fail (a deliberately broken fast path and a perturbation of every case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "ops/activation.h"
#include "ops/op_test_registry.h"

namespace stretch::ops::testing {
namespace {

bool long_tests() {
  const char* v = std::getenv("STRETCH_LONG");
  return v && std::string(v) == "1";
}

TEST(OpRegistry, EveryCaseMatchesReference) {
  int checked = 0;
  for (const OpCase& c : op_cases()) {
    if (c.size == Size::Bench) continue;  // BenchShapesMatchReference (STRETCH_LONG=1)
    CheckReport r = check_case(c);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_GT(r.compared, 0) << c.name();
    if (std::getenv("STRETCH_OPS_VERBOSE"))  // how close each case is to its tolerance
      std::printf("%-60s worst |diff|/allowed = %.3g over %lld elements\n", c.name().c_str(), r.worst_ratio,
                  static_cast<long long>(r.compared));
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(OpRegistry, BenchShapesMatchReference) {
  if (!long_tests()) GTEST_SKIP() << "benchmark-size cases run with STRETCH_LONG=1";
  for (const OpCase& c : op_cases()) {
    if (c.size != Size::Bench) continue;
    CheckReport r = check_case(c);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(OpRegistry, EveryOpIsRegistered) {
  std::set<std::string> ops;
  for (const OpCase& c : op_cases()) ops.insert(c.op);
  for (const char* op : {"linear", "layernorm", "relu", "gelu", "gelu_accurate", "tanh", "linear_activation", "add", "axpy", "scale", "channel_scale", "split/merge_heads",
                         "embedding", "dropout", "cross_entropy", "rope", "sinusoidal"})
    EXPECT_TRUE(ops.count(op)) << op;
}

// Every case, with one output element pushed 3 tolerances away, must be reported as failing, for
// each output of each pass: the comparison covers every output and cannot pass vacuously.
TEST(OpRegistry, PerturbedFastPathIsCaught) {
  int perturbed = 0;
  for (const OpCase& c : op_cases()) {
    if (c.size == Size::Bench) continue;
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      if (pass == Pass::Backward && !c.has_backward) continue;
      auto probe = c.make();
      if (pass == Pass::Backward) {
        probe->run(Impl::Reference, Pass::Forward);
        probe->run(Impl::Reference, Pass::Backward);
      } else {
        probe->run(Impl::Reference, Pass::Forward);
      }
      const int outputs = static_cast<int>(probe->outputs(Impl::Reference, pass).size());
      for (int k = 0; k < outputs; ++k) {
        CheckReport r = check_case(perturbed_case(c, pass, k, 3.0));
        EXPECT_FALSE(r.ok) << c.name() << " output " << k << ": a perturbed fast path passed";
        ++perturbed;
      }
    }
  }
  EXPECT_GT(perturbed, 80);
}

// A realistic bug: GELU's tanh approximation wired in as the "fast" path.
class TanhGeluRun : public OpRun {
 public:
  TanhGeluRun() : inp_(random_floats(257, 4, -4.f, 4.f)), out_{std::vector<float>(257), std::vector<float>(257)} {}
  void run(Impl impl, Pass) override {
    auto& o = out_[static_cast<int>(impl)];
    if (impl == Impl::Reference) {
      ref::activation_forward(o.data(), inp_.data(), 257, Activation::Gelu);
    } else {
      for (int i = 0; i < 257; ++i) {
        const float x = inp_[i];
        o[i] = 0.5f * x * (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
      }
    }
  }
  std::vector<Output> outputs(Impl impl, Pass) override {
    auto& o = out_[static_cast<int>(impl)];
    return {{"out", o.data(), 257}};
  }
  int64_t bytes(Pass) const override { return 0; }

 private:
  std::vector<float> inp_;
  std::vector<float> out_[2];
};

TEST(OpRegistry, BrokenGeluIsCaught) {
  const OpCase* gelu = nullptr;
  for (const OpCase& c : op_cases())
    if (c.op == "gelu") gelu = &c;
  ASSERT_NE(gelu, nullptr);
  OpCase broken{.op = "gelu", .shape = "tanh-approximation", .tol = gelu->tol,
                .make = [] { return std::make_unique<TanhGeluRun>(); }, .has_backward = false};
  CheckReport r = check_case(broken);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("out["), std::string::npos) << r.message;
}

TEST(OpRegistry, CompareOutputsRejectsNaN) {
  float a[2] = {1.f, NAN}, b[2] = {1.f, NAN};
  CheckReport r = compare_outputs({{"x", a, 2}}, {{"x", b, 2}}, Tolerance{1, 1, "loose"});
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace stretch::ops::testing
