// tests/ops/op_cases_pointwise.cpp — registry cases for activations, elementwise ops, head
// transposes, embedding and dropout.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/activation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/op_test_registry.h"

namespace stretch::ops::testing {
namespace {

Output out_of(const char* name, std::vector<float>& v) { return {name, v.data(), static_cast<int64_t>(v.size())}; }

// ---- activation ------------------------------------------------------------------------------
// overwrite: backward with GradInit::Overwrite into a garbage buffer vs the reference into zeros.
class ActivationRun : public OpRun {
 public:
  ActivationRun(int64_t n, Activation act, float range, uint64_t seed, bool overwrite = false)
      : n_(n), act_(act), overwrite_(overwrite) {
    inp_ = random_floats(n, seed, -range, range);
    if (n > 0) inp_[0] = 0.f;  // the kink / the origin
    dout_ = random_floats(n, seed + 1);
    for (auto& o : o_) {
      o.out.assign(n, 0.f);
      o.dinp = random_floats(n, seed + 2);
    }
    if (overwrite) {
      auto& r = o_[static_cast<int>(Impl::Reference)].dinp;
      std::fill(r.begin(), r.end(), 0.f);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) activation_forward(o.out.data(), inp_.data(), n_, act_);
      else ref::activation_forward(o.out.data(), inp_.data(), n_, act_);
    } else {
      if (impl == Impl::Fast)
        activation_backward(o.dinp.data(), dout_.data(), inp_.data(), n_, act_,
                            overwrite_ ? GradInit::Overwrite : GradInit::Accumulate);
      else ref::activation_backward(o.dinp.data(), dout_.data(), inp_.data(), n_, act_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dinp", o.dinp)};
  }
  int64_t bytes(Pass pass) const override { return 4 * n_ * (pass == Pass::Forward ? 2 : 4); }

 private:
  struct Out {
    std::vector<float> out, dinp;
  };
  int64_t n_;
  Activation act_;
  bool overwrite_;
  std::vector<float> inp_, dout_;
  Out o_[2];
};

// ---- elementwise -----------------------------------------------------------------------------
enum class Ew : uint8_t { Add, AddAliased, Axpy, Scale };
class ElementwiseRun : public OpRun {
 public:
  ElementwiseRun(int64_t n, Ew kind, uint64_t seed) : n_(n), kind_(kind) {
    a_ = random_floats(n, seed);
    b_ = random_floats(n, seed + 1);
    for (auto& o : o_) o.out = random_floats(n, seed + 2);
  }
  void run(Impl impl, Pass pass) override {
    std::vector<float>& out = o_[static_cast<int>(impl)].out;
    const bool fast = impl == Impl::Fast;
    switch (kind_) {
      case Ew::Add: fast ? add_forward(out.data(), a_.data(), b_.data(), n_) : ref::add_forward(out.data(), a_.data(), b_.data(), n_); break;
      case Ew::AddAliased:  // out += b through aliasing: out = out + b
        fast ? add_forward(out.data(), out.data(), b_.data(), n_) : ref::add_forward(out.data(), out.data(), b_.data(), n_);
        break;
      case Ew::Axpy: fast ? axpy(out.data(), a_.data(), -0.37f, n_) : ref::axpy(out.data(), a_.data(), -0.37f, n_); break;
      case Ew::Scale: fast ? scale_forward(out.data(), a_.data(), 1.7f, n_) : ref::scale_forward(out.data(), a_.data(), 1.7f, n_); break;
    }
  }
  std::vector<Output> outputs(Impl impl, Pass) override { return {out_of("out", o_[static_cast<int>(impl)].out)}; }
  int64_t bytes(Pass) const override { return 4 * n_ * 3; }

 private:
  struct Out {
    std::vector<float> out;
  };
  int64_t n_;
  Ew kind_;
  std::vector<float> a_, b_;
  Out o_[2];
};

class HeadsRun : public OpRun {
 public:
  HeadsRun(HeadDims d, uint64_t seed) : d_(d) {
    const int64_t n = d.b * d.t * d.h * d.d;
    inp_ = random_floats(n, seed);
    for (auto& o : o_) {
      o.split.assign(n, 0.f);
      o.merged.assign(n, 0.f);
    }
  }
  // Forward = split, Backward = merge of the split result (split's backward, and the round trip).
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) split_heads(o.split.data(), inp_.data(), d_);
      else ref::split_heads(o.split.data(), inp_.data(), d_);
    } else {
      if (impl == Impl::Fast) merge_heads(o.merged.data(), o.split.data(), d_);
      else ref::merge_heads(o.merged.data(), o.split.data(), d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("split", o.split) : out_of("merged", o.merged)};
  }
  int64_t bytes(Pass) const override { return 4 * 2 * d_.b * d_.t * d_.h * d_.d; }

 private:
  struct Out {
    std::vector<float> split, merged;
  };
  HeadDims d_;
  std::vector<float> inp_;
  Out o_[2];
};

// ---- embedding -------------------------------------------------------------------------------
class EmbeddingRun : public OpRun {
 public:
  EmbeddingRun(EmbeddingDims d, float scale, uint64_t seed) : d_(d), scale_(scale) {
    ids_ = random_ids(d.n, static_cast<int32_t>(d.v), seed);
    if (d.n > 2) ids_[d.n - 1] = ids_[0];  // a repeated id: the scatter-add must sum both
    table_ = random_floats(d.v * d.c, seed + 1);
    dout_ = random_floats(d.n * d.c, seed + 2);
    for (auto& o : o_) {
      o.out.assign(d.n * d.c, 0.f);
      o.dtable = random_floats(d.v * d.c, seed + 3);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) embedding_forward(o.out.data(), ids_.data(), table_.data(), scale_, d_);
      else ref::embedding_forward(o.out.data(), ids_.data(), table_.data(), scale_, d_);
    } else {
      if (impl == Impl::Fast) embedding_backward(o.dtable.data(), dout_.data(), ids_.data(), scale_, d_);
      else ref::embedding_backward(o.dtable.data(), dout_.data(), ids_.data(), scale_, d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dtable", o.dtable)};
  }
  int64_t bytes(Pass) const override { return 4 * 3 * d_.n * d_.c; }

 private:
  struct Out {
    std::vector<float> out, dtable;
  };
  EmbeddingDims d_;
  float scale_;
  std::vector<int32_t> ids_;
  std::vector<float> table_, dout_;
  Out o_[2];
};

// ---- dropout ---------------------------------------------------------------------------------
// Plain: forward / backward (+=). ResidualAdd: forward out = res + dropout(inp) against the
// reference's fused form. Overwrite: backward with GradInit::Overwrite into a garbage-filled buffer
// against the reference accumulating into zeros (same result iff nothing of the old buffer leaks).
enum class DropVariant : uint8_t { Plain, ResidualAdd, Overwrite };
class DropoutRun : public OpRun {
 public:
  DropoutRun(int64_t n, DropoutParams p, DropVariant v, uint64_t seed) : n_(n), p_(p), v_(v) {
    inp_ = random_floats(n, seed);
    res_ = random_floats(n, seed + 3);
    dout_ = random_floats(n, seed + 1);
    for (auto& o : o_) {
      o.out.assign(n, 0.f);
      o.dinp = random_floats(n, seed + 2);
    }
    if (v == DropVariant::Overwrite) std::fill(o_[static_cast<int>(Impl::Reference)].dinp.begin(),
                                               o_[static_cast<int>(Impl::Reference)].dinp.end(), 0.f);
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    const bool fast = impl == Impl::Fast;
    if (pass == Pass::Forward) {
      if (v_ == DropVariant::ResidualAdd) {
        if (fast) dropout_add_forward(o.out.data(), res_.data(), inp_.data(), n_, p_);
        else ref::dropout_add_forward(o.out.data(), res_.data(), inp_.data(), n_, p_);
      } else {
        if (fast) dropout_forward(o.out.data(), inp_.data(), n_, p_);
        else ref::dropout_forward(o.out.data(), inp_.data(), n_, p_);
      }
    } else {
      const GradInit init = v_ == DropVariant::Overwrite ? GradInit::Overwrite : GradInit::Accumulate;
      if (fast) dropout_backward(o.dinp.data(), dout_.data(), n_, p_, init);
      else ref::dropout_backward(o.dinp.data(), dout_.data(), n_, p_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dinp", o.dinp)};
  }
  int64_t bytes(Pass pass) const override { return 4 * n_ * (pass == Pass::Forward ? 2 : 3); }

 private:
  struct Out {
    std::vector<float> out, dinp;
  };
  int64_t n_;
  DropoutParams p_;
  DropVariant v_;
  std::vector<float> inp_, res_, dout_;
  Out o_[2];
};

}  // namespace

void add_activation_cases(std::vector<OpCase>& cases) {
  const Tolerance exact{0, 0, "ReLU is a select, linear a copy: bitwise equal"};
  const Tolerance gelu{2e-6, 1e-5,
                       "libmvec erff/expf are ≤ 4 ulp (5e-7 relative) vs double erf/exp; cancellation in 1 + erf "
                       "near x = −4 leaves ~1e-6 absolute"};
  const Tolerance tanh_based{2e-6, 1e-5,
                             "libmvec tanhf is ≤ 4 ulp vs double tanh, and the float cubic ≤ 3 roundings; "
                             "cancellation in 1 + tanh (gelu_accurate near x = −3) and 1 − tanh² leaves ~1e-6 absolute"};
  const int64_t ns[] = {1, 15, 17, 1000, 100003};
  uint64_t seed = 500;
  for (int64_t n : ns) {
    for (Activation a : {Activation::Relu, Activation::Gelu, Activation::GeluAccurate, Activation::Tanh,
                         Activation::Linear}) {
      const uint64_t sd = seed += 10;
      const float range = n > 1000 ? 8.f : 4.f;
      const std::string name = a == Activation::Linear ? "linear_activation" : activation_name(a);  // "linear": the layer
      const Tolerance tol = a == Activation::Relu || a == Activation::Linear ? exact
                            : a == Activation::Gelu                         ? gelu
                                                                            : tanh_based;
      cases.push_back(OpCase{.op = name,
                             .shape = "n=" + std::to_string(n),
                             .tol = tol,
                             .make = [n, a, range, sd] { return std::make_unique<ActivationRun>(n, a, range, sd); }});
      cases.push_back(OpCase{.op = name + "(grad=)",
                             .shape = "n=" + std::to_string(n),
                             .tol = tol,
                             .make = [n, a, range, sd] {
                               return std::make_unique<ActivationRun>(n, a, range, sd + 5, true);
                             }});
    }
  }
  cases.push_back(OpCase{.op = "gelu", .shape = "n=4194304", .tol = gelu,
                         .make = [] { return std::make_unique<ActivationRun>(4096 * 1024, Activation::Gelu, 4.f, 9); },
                         .size = Size::Bench});
  cases.push_back(OpCase{.op = "gelu_accurate", .shape = "n=4194304", .tol = tanh_based,
                         .make = [] {
                           return std::make_unique<ActivationRun>(4096 * 1024, Activation::GeluAccurate, 4.f, 9);
                         },
                         .size = Size::Bench});
}

void add_elementwise_cases(std::vector<OpCase>& cases) {
  const Tolerance one_op{0, 2.5e-7,
                         "one float rounding per element; FMA contraction may differ between builds: ≤ 2 ulp"};
  const std::pair<Ew, const char*> kinds[] = {
      {Ew::Add, "add"}, {Ew::AddAliased, "add(out=a)"}, {Ew::Axpy, "axpy"}, {Ew::Scale, "scale"}};
  uint64_t seed = 700;
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{70001}}) {
    for (auto [k, name] : kinds) {
      const uint64_t sd = seed += 10;
      const Ew kind = k;
      cases.push_back(OpCase{.op = name, .shape = "n=" + std::to_string(n), .tol = one_op,
                             .make = [n, kind, sd] { return std::make_unique<ElementwiseRun>(n, kind, sd); },
                             .has_backward = false});
    }
  }
  const Tolerance exact{0, 0, "a permutation: bitwise equal"};
  const HeadDims heads[] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 17, 6, 64}, {1, 1, 12, 64}};
  for (const HeadDims& h : heads) {
    const uint64_t sd = seed += 10;
    cases.push_back(OpCase{.op = "split/merge_heads",
                           .shape = "b=" + std::to_string(h.b) + " t=" + std::to_string(h.t) +
                                    " h=" + std::to_string(h.h) + " d=" + std::to_string(h.d),
                           .tol = exact,
                           .make = [h, sd] { return std::make_unique<HeadsRun>(h, sd); }});
  }
}

void add_embedding_cases(std::vector<OpCase>& cases) {
  const Tolerance tol{1e-6, 1e-6,
                      "forward is one multiply (bitwise); backward adds in the same id order as the reference, "
                      "only FMA contraction may differ: ~1 ulp per addition"};
  struct S {
    int64_t n, v, c;
    float scale;
    Size size;
  };
  const S shapes[] = {{1, 1, 1, 1.f, Size::Edge},     {7, 1, 5, 32.f, Size::Edge},   {64, 10, 17, 1.f, Size::Edge},
                      {100, 1000, 256, 16.f, Size::Edge}, {4096, 33280, 256, 16.f, Size::Bench}};
  uint64_t seed = 900;
  for (const S& s : shapes) {
    const uint64_t sd = seed += 10;
    const EmbeddingDims d{.n = s.n, .v = s.v, .c = s.c};
    const float scale = s.scale;
    cases.push_back(OpCase{.op = "embedding",
                           .shape = "n=" + std::to_string(s.n) + " v=" + std::to_string(s.v) + " c=" + std::to_string(s.c),
                           .tol = tol,
                           .make = [d, scale, sd] { return std::make_unique<EmbeddingRun>(d, scale, sd); },
                           .size = s.size});
  }
}

void add_dropout_cases(std::vector<OpCase>& cases) {
  // Same mask and same multiply; `acc + x·m` may be contracted into one FMA in one build and not
  // in the other, which moves the result by up to ~1 ulp of the larger OPERAND (not of the result:
  // with cancellation the result can be far smaller). Operands here: |acc| ≤ 1, |x·m| ≤ 1/(1−p), so
  // atol = 2 ulp(1 + 1/(1−p)) = 2^-22·(1 + 1/(1−p)) on top of rtol 2 ulp.
  auto tol_for = [](float p) {
    return Tolerance{std::ldexp(1.0, -22) * (1.0 + 1.0 / (1.0 - p)), 2.5e-7,
                     "same mask and same multiply; acc + x·m may differ by FMA contraction: ≤ 2 ulp of the larger "
                     "operand"};
  };
  struct S {
    int64_t n;
    float p;
  };
  const S shapes[] = {{1, 0.5f}, {3, 0.1f}, {7, 0.3f}, {1001, 0.f}, {100003, 0.3f}, {4099, 0.9f}, {70001, 0.1f}};
  const std::pair<DropVariant, const char*> variants[] = {{DropVariant::Plain, "dropout"},
                                                          {DropVariant::ResidualAdd, "dropout_add"},
                                                          {DropVariant::Overwrite, "dropout(grad=)"}};
  uint64_t seed = 1100;
  for (const S& s : shapes) {
    for (auto [v, name] : variants) {
      const uint64_t sd = seed += 10;
      const DropoutParams p{.p = s.p, .seed = sd, .stream = 3};
      const int64_t n = s.n;
      const DropVariant var = v;
      cases.push_back(OpCase{.op = name,
                             .shape = "n=" + std::to_string(n) + " p=" + std::to_string(s.p).substr(0, 3),
                             .tol = tol_for(s.p),
                             .make = [n, p, var, sd] { return std::make_unique<DropoutRun>(n, p, var, sd); }});
    }
  }
}

}  // namespace stretch::ops::testing
