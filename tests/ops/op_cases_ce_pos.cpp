// tests/ops/op_cases_ce_pos.cpp — registry cases for cross-entropy, RoPE and sinusoidal positions.
#include <algorithm>
#include <cmath>
#include <utility>
#include <string>

#include "ops/cross_entropy.h"
#include "ops/cross_entropy_softmax.h"
#include "ops/op_test_registry.h"
#include "ops/rope.h"
#include "ops/sinusoidal.h"

namespace stretch::ops::testing {
namespace {

Output out_of(const char* name, std::vector<float>& v) { return {name, v.data(), static_cast<int64_t>(v.size())}; }

// ---- cross-entropy ---------------------------------------------------------------------------
enum class Targets : uint8_t { Random, SomeIgnored, AllIgnored };
// Backward variants: Plain (+= into random gradients); Overwrite (GradInit::Overwrite into a garbage
// buffer) and InPlace (Overwrite with dlogits aliasing a copy of the logits, training's path), both
// against the reference accumulating into zeros. Fused: cross_entropy_forward_inplace +
// cross_entropy_backward_inplace on a copy of the logits (training's path) against the reference
// forward and backward into zeros. FusedSoftmax: the same with InplaceForm::Softmax (sum only), at
// dloss 0.75 (backward's extra ×dloss) and FusedSoftmaxUnit at dloss 1 (training's case, only the
// target entries change in backward).
enum class CeGrad : uint8_t { Plain, Overwrite, InPlace, Fused, FusedSoftmax, FusedSoftmaxUnit };
class CrossEntropyRun : public OpRun {
 public:
  CrossEntropyRun(CrossEntropyDims d, float logit_scale, Targets t, CeGrad g, uint64_t seed)
      : d_(d), g_(g), dloss_(g == CeGrad::FusedSoftmaxUnit ? 1.f : 0.75f) {
    logits_ = random_floats(d.n * d.v, seed, -logit_scale, logit_scale);
    targets_ = random_ids(d.n, static_cast<int32_t>(d.v), seed + 1);
    for (int64_t n = 0; n < d.n; ++n) {
      if (t == Targets::AllIgnored || (t == Targets::SomeIgnored && n % 3 == 1)) targets_[n] = d.ignore_index;
    }
    for (auto& o : o_) {
      o.losses.assign(d.n, 0.f);
      o.lse.assign(d.n, 0.f);
      o.scalars.assign(2, 0.f);
      o.dlogits = random_floats(d.n * d.v, seed + 2);
    }
    if (g != CeGrad::Plain) {
      auto& r = o_[static_cast<int>(Impl::Reference)].dlogits;
      std::fill(r.begin(), r.end(), 0.f);
    }
    if (g != CeGrad::Plain && g != CeGrad::Overwrite) o_[static_cast<int>(Impl::Fast)].dlogits = logits_;
    inv_sum_.assign(d.n, 0.f);
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (g_ != CeGrad::Plain && g_ != CeGrad::Overwrite && g_ != CeGrad::InPlace && impl == Impl::Fast) {
      const InplaceForm form = g_ == CeGrad::Fused ? InplaceForm::Exp : InplaceForm::Softmax;
      if (pass == Pass::Forward) {
        CrossEntropyResult r = cross_entropy_forward_inplace(o.dlogits.data(), inv_sum_.data(), o.losses.data(),
                                                             o.lse.data(), targets_.data(), d_, form);
        o.scalars = {static_cast<float>(r.loss), static_cast<float>(r.count)};
      } else {
        cross_entropy_backward_inplace(o.dlogits.data(), inv_sum_.data(), targets_.data(), dloss_,
                                       static_cast<int64_t>(o.scalars[1]), d_, form);
      }
      return;
    }
    if (pass == Pass::Forward) {
      CrossEntropyResult r =
          impl == Impl::Fast
              ? cross_entropy_forward(o.losses.data(), o.lse.data(), logits_.data(), targets_.data(), d_)
              : ref::cross_entropy_forward(o.losses.data(), o.lse.data(), logits_.data(), targets_.data(), d_);
      o.scalars = {static_cast<float>(r.loss), static_cast<float>(r.count)};
    } else {
      const int64_t count = static_cast<int64_t>(o.scalars[1]);
      const GradInit init = g_ == CeGrad::Plain ? GradInit::Accumulate : GradInit::Overwrite;
      const float* x = g_ == CeGrad::InPlace ? o.dlogits.data() : logits_.data();
      if (impl == Impl::Fast)
        cross_entropy_backward(o.dlogits.data(), x, o.lse.data(), targets_.data(), dloss_, count, d_, init);
      else
        ref::cross_entropy_backward(o.dlogits.data(), logits_.data(), o.lse.data(), targets_.data(), dloss_, count, d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) return {out_of("losses", o.losses), out_of("lse", o.lse), out_of("loss,count", o.scalars)};
    return {out_of("dlogits", o.dlogits)};
  }
  int64_t bytes(Pass pass) const override {
    const int64_t nv = d_.n * d_.v;
    return 4 * (pass == Pass::Forward ? nv : 3 * nv);  // backward reads logits, reads+writes dlogits
  }

 private:
  struct Out {
    std::vector<float> losses, lse, scalars, dlogits;
  };
  CrossEntropyDims d_;
  CeGrad g_;
  float dloss_;
  std::vector<float> logits_, inv_sum_;
  std::vector<int32_t> targets_;
  Out o_[2];
};

// ---- rope ------------------------------------------------------------------------------------
class RopeRun : public OpRun {
 public:
  RopeRun(RopeDims d, uint64_t seed) : d_(d) {
    const int64_t n = d.b * d.h * d.t * d.d;
    inp_ = random_floats(n, seed);
    dout_ = random_floats(n, seed + 1);
    for (auto& o : o_) {
      o.out.assign(n, 0.f);
      o.dinp = random_floats(n, seed + 2);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) rope_forward(o.out.data(), inp_.data(), d_);
      else ref::rope_forward(o.out.data(), inp_.data(), d_);
    } else {
      if (impl == Impl::Fast) rope_backward(o.dinp.data(), dout_.data(), d_);
      else ref::rope_backward(o.dinp.data(), dout_.data(), d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dinp", o.dinp)};
  }
  int64_t bytes(Pass pass) const override {
    const int64_t n = d_.b * d_.h * d_.t * d_.d;
    return 4 * n * (pass == Pass::Forward ? 2 : 3);
  }

 private:
  struct Out {
    std::vector<float> out, dinp;
  };
  RopeDims d_;
  std::vector<float> inp_, dout_;
  Out o_[2];
};

// ---- sinusoidal ------------------------------------------------------------------------------
class SinusoidalRun : public OpRun {
 public:
  SinusoidalRun(SinusoidalDims d, int32_t first_pos) : d_(d) {
    positions_.resize(d.n);
    for (int64_t n = 0; n < d.n; ++n) positions_[n] = first_pos + static_cast<int32_t>(n);
    if (d.n > 2) positions_[1] = d.padding_idx;  // a pad position in the middle
    for (auto& o : o_) o.out.assign(d.n * d.c, -1.f);
  }
  void run(Impl impl, Pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (impl == Impl::Fast) sinusoidal_forward(o.out.data(), positions_.data(), d_);
    else ref::sinusoidal_forward(o.out.data(), positions_.data(), d_);
  }
  std::vector<Output> outputs(Impl impl, Pass) override { return {out_of("table", o_[static_cast<int>(impl)].out)}; }
  int64_t bytes(Pass) const override { return 4 * d_.n * d_.c; }

 private:
  struct Out {
    std::vector<float> out;
  };
  SinusoidalDims d_;
  std::vector<int32_t> positions_;
  Out o_[2];
};

}  // namespace

void add_cross_entropy_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t n, v;
    float scale;
    Targets t;
    Reduction r;
    Size size;
  };
  const S shapes[] = {
      {1, 1, 1.f, Targets::Random, Reduction::Sum, Size::Edge},        // V = 1: loss 0, grad 0
      {1, 7, 3.f, Targets::Random, Reduction::Mean, Size::Edge},
      {5, 17, 3.f, Targets::SomeIgnored, Reduction::Sum, Size::Edge},
      {6, 33, 3.f, Targets::SomeIgnored, Reduction::Mean, Size::Edge},
      {4, 9, 3.f, Targets::AllIgnored, Reduction::Mean, Size::Edge},   // count 0
      {4, 9, 3.f, Targets::AllIgnored, Reduction::Sum, Size::Edge},
      {3, 1000, 1e4f, Targets::Random, Reduction::Sum, Size::Edge},   // softmax stability: |logits| ≤ 1e4
      {17, 2049, 8.f, Targets::SomeIgnored, Reduction::Mean, Size::Edge},  // V crosses the 512 chunk
      {64, 2049, 8.f, Targets::SomeIgnored, Reduction::Sum, Size::Edge},   // threaded rows, summed
      {1024, 33280, 8.f, Targets::Random, Reduction::Sum, Size::Bench},
  };
  uint64_t seed = 1300;
  for (const S& s : shapes) {
    const uint64_t sd = seed += 10;
    // lse: float chunk sums of ≤ 512 terms in (0, 1] (relative error ≲ 512·u = 3e-5 worst case, ~1e-6
    // typical) and libmvec expf (≤ 4 ulp); logits of size L lose L·u absolute in x − lse.
    const double big = s.scale > 100.f ? s.scale : 10.0;
    Tolerance tol{4e-7 * big, 2e-5,
                  "online softmax with float chunk sums and 4-ulp expf vs a double two-pass reference: lse/loss "
                  "error ≲ 3e-5 relative worst case; |logits| = L costs L·u absolute in x − lse, hence atol ∝ "
                  "max(10, L); the summed loss is compared relatively"};
    const CrossEntropyDims d{.n = s.n, .v = s.v, .ignore_index = 1, .reduction = s.r};
    const float scale = s.scale;
    const Targets t = s.t;
    const char* tn = t == Targets::Random ? "" : t == Targets::SomeIgnored ? " some-ignored" : " all-ignored";
    for (auto [g, name] : {std::pair{CeGrad::Plain, "cross_entropy"}, std::pair{CeGrad::Overwrite, "cross_entropy(grad=)"},
                           std::pair{CeGrad::InPlace, "cross_entropy(in place)"},
                           std::pair{CeGrad::Fused, "cross_entropy(fused in place)"},
                           std::pair{CeGrad::FusedSoftmax, "cross_entropy(fused in place, softmax form)"},
                           std::pair{CeGrad::FusedSoftmaxUnit, "cross_entropy(fused in place, softmax form, dloss 1)"}}) {
      if (g != CeGrad::Plain && s.size == Size::Bench) continue;
      if ((g == CeGrad::FusedSoftmax || g == CeGrad::FusedSoftmaxUnit) && s.r != Reduction::Sum) continue;
      const CeGrad gv = g;
      cases.push_back(OpCase{.op = name,
                             .shape = "n=" + std::to_string(s.n) + " v=" + std::to_string(s.v) +
                                      " |x|<=" + std::to_string(static_cast<int>(s.scale)) + tn +
                                      (s.r == Reduction::Mean ? " mean" : " sum"),
                             .tol = tol,
                             .make = [d, scale, t, gv, sd] {
                               return std::make_unique<CrossEntropyRun>(d, scale, t, gv, sd);
                             },
                             .size = s.size});
    }
  }
}

void add_position_cases(std::vector<OpCase>& cases) {
  const Tolerance rope_tol{1e-6, 1e-6,
                           "cos/sin rounded to float once (both paths); the fast path's float rotation may use FMA "
                           "where the reference rounds in double: ≤ 2 ulp of |x| ≤ 1"};
  const RopeDims ropes[] = {{.b = 1, .h = 1, .t = 1, .d = 2},
                            {.b = 1, .h = 3, .t = 7, .d = 6, .pos0 = 5},
                            {.b = 2, .h = 6, .t = 33, .d = 64},
                            {.b = 1, .h = 5, .t = 1, .d = 64, .pos0 = 16383},  // cached decoding, T=1, long position
                            {.b = 1, .h = 2, .t = 20000, .d = 16}};            // T longer than any cached table
  uint64_t seed = 1500;
  for (const RopeDims& r : ropes) {
    const uint64_t sd = seed += 10;
    cases.push_back(OpCase{.op = "rope",
                           .shape = "b=" + std::to_string(r.b) + " h=" + std::to_string(r.h) + " t=" +
                                    std::to_string(r.t) + " d=" + std::to_string(r.d) + " pos0=" + std::to_string(r.pos0),
                           .tol = rope_tol,
                           .make = [r, sd] { return std::make_unique<RopeRun>(r, sd); }});
  }
  const Tolerance exact{0, 0, "same float steps and the same double sin/cos in both paths: bitwise equal"};
  const std::pair<int64_t, int64_t> sins[] = {{1, 4}, {3, 5}, {37, 8}, {100, 1024}, {3000, 33}};
  for (auto [n, c] : sins) {
    const SinusoidalDims d{.n = n, .c = c, .padding_idx = 1};
    cases.push_back(OpCase{.op = "sinusoidal",
                           .shape = "n=" + std::to_string(n) + " c=" + std::to_string(c),
                           .tol = exact,
                           .make = [d] { return std::make_unique<SinusoidalRun>(d, 2); },
                           .has_backward = false});
  }
}

}  // namespace stretch::ops::testing
