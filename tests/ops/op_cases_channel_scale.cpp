// tests/ops/op_cases_channel_scale.cpp — registry cases for channel_scale (NormFormer's w_resid,
// group 1, and c_attn, group D): fast path vs the naive reference, forward and backward, with the
// input gradient accumulated (+=) and overwritten (= into a garbage-filled buffer).
#include <algorithm>
#include <string>

#include "ops/channel_scale.h"
#include "ops/op_test_registry.h"

namespace stretch::ops::testing {
namespace {

class ChannelScaleRun : public OpRun {
 public:
  ChannelScaleRun(ChannelScaleDims d, bool overwrite, uint64_t seed) : d_(d), overwrite_(overwrite) {
    const int64_t N = d.n, C = d.c;
    x_ = random_floats(N * C, seed);
    w_ = random_floats(C / d.group, seed + 1, 0.5f, 1.5f);
    dy_ = random_floats(N * C, seed + 2);
    for (auto& o : o_) {
      o.y.assign(N * C, 0.f);
      o.dx = random_floats(N * C, seed + 3);  // non-zero and identical: the += contract is compared
      o.dw = random_floats(C / d.group, seed + 4);
    }
    if (overwrite) {  // the reference accumulates into zeros; the fast path overwrites garbage
      auto& r = o_[static_cast<int>(Impl::Reference)].dx;
      std::fill(r.begin(), r.end(), 0.f);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) channel_scale_forward(o.y.data(), x_.data(), w_.data(), d_);
      else ref::channel_scale_forward(o.y.data(), x_.data(), w_.data(), d_);
    } else if (impl == Impl::Fast) {
      channel_scale_backward(o.dx.data(), o.dw.data(), dy_.data(), x_.data(), w_.data(), d_,
                             overwrite_ ? GradInit::Overwrite : GradInit::Accumulate);
    } else {
      ref::channel_scale_backward(o.dx.data(), o.dw.data(), dy_.data(), x_.data(), w_.data(), d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) return {{"y", o.y.data(), static_cast<int64_t>(o.y.size())}};
    return {{"dx", o.dx.data(), static_cast<int64_t>(o.dx.size())},
            {"dw", o.dw.data(), static_cast<int64_t>(o.dw.size())}};
  }
  int64_t bytes(Pass pass) const override {
    const int64_t NC = d_.n * d_.c;
    // forward: read x, write y; backward: read dy, x, read+write dx.
    return 4 * (pass == Pass::Forward ? 2 * NC : 4 * NC);
  }

 private:
  struct Out {
    std::vector<float> y, dx, dw;
  };
  ChannelScaleDims d_;
  bool overwrite_;
  std::vector<float> x_, w_, dy_;
  Out o_[2];
};

}  // namespace

void add_channel_scale_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t n, c, group;
    Size size;
  };
  // group 1 (w_resid), group D of H heads (c_attn), a single group, one row, rows across reduce_rows' blocks
  const S shapes[] = {{1, 1, 1, Size::Edge},    {3, 7, 1, Size::Edge},     {5, 12, 4, Size::Edge},
                      {1, 48, 48, Size::Edge},  {97, 48, 8, Size::Edge},   {130, 256, 64, Size::Edge},
                      {33, 130, 1, Size::Edge}, {4096, 512, 64, Size::Bench}, {4096, 1024, 1, Size::Bench}};
  uint64_t seed = 1700;
  for (const S& s : shapes) {
    // dw sums N·G products of terms in [-1.5, 1.5] in another order than the reference's:
    // error ≲ K·u·Σ|terms| with K = N·G; forward and dx are one rounding each (exact order).
    const double k = static_cast<double>(s.n * s.group);
    Tolerance tol{2e-7 * k, 1e-6,
                  "y and dx are one product each (the same rounding as the reference); dw's N·G-term sums are "
                  "blocked (reduce_rows) and then grouped, against the reference's row-major order: error ≲ "
                  "N·G·u·|terms| (u = 6e-8), 2e-7·N·G leaves margin while a wrong group or row is O(1)"};
    const ChannelScaleDims d{.n = s.n, .c = s.c, .group = s.group};
    for (bool overwrite : {false, true}) {
      if (overwrite && s.size == Size::Bench) continue;
      const uint64_t sd = seed += 10;
      cases.push_back(OpCase{.op = overwrite ? "channel_scale(dx=)" : "channel_scale",
                             .shape = "n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) +
                                      " group=" + std::to_string(s.group),
                             .tol = tol,
                             .make = [d, overwrite, sd] { return std::make_unique<ChannelScaleRun>(d, overwrite, sd); },
                             .size = s.size});
    }
  }
}

}  // namespace stretch::ops::testing
