// tests/ops/op_test_registry.cpp — the checker, the perturbation wrapper and the case list.
#include "ops/op_test_registry.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/rng.h"

namespace stretch::ops::testing {

CheckReport compare_outputs(const std::vector<Output>& fast, const std::vector<Output>& ref, const Tolerance& tol) {
  CheckReport r;
  auto fail = [&](const std::string& m) {
    if (r.ok) r.message = m;
    r.ok = false;
  };
  if (fast.size() != ref.size()) {
    fail("output count differs: fast " + std::to_string(fast.size()) + ", reference " + std::to_string(ref.size()));
    return r;
  }
  for (size_t k = 0; k < fast.size(); ++k) {
    const Output &f = fast[k], &g = ref[k];
    if (f.name != g.name || f.n != g.n) {
      fail("output " + std::to_string(k) + " differs in name/size: " + f.name + " vs " + g.name);
      continue;
    }
    for (int64_t i = 0; i < f.n; ++i) {
      const double a = f.data[i], b = g.data[i];
      const double allowed = tol.atol + tol.rtol * std::abs(b);
      const double err = std::abs(a - b);
      r.compared++;
      const double ratio = std::isnan(a) || std::isnan(b) ? INFINITY : (allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0));
      if (ratio > r.worst_ratio) r.worst_ratio = ratio;
      if (!(err <= allowed)) {
        std::ostringstream os;
        os << f.name << "[" << i << "]: fast " << a << " vs reference " << b << " (|diff| " << err << " > allowed "
           << allowed << " = atol " << tol.atol << " + rtol " << tol.rtol << "·|ref|; tolerance reason: " << tol.reason
           << ")";
        fail(os.str());
      }
    }
  }
  return r;
}

CheckReport check_case(const OpCase& c) {
  auto run = c.make();
  CheckReport total;
  const Pass passes[] = {Pass::Forward, Pass::Backward};
  for (Pass pass : passes) {
    if (pass == Pass::Backward && !c.has_backward) break;
    run->run(Impl::Reference, pass);
    run->run(Impl::Fast, pass);
    CheckReport r = compare_outputs(run->outputs(Impl::Fast, pass), run->outputs(Impl::Reference, pass), c.tol);
    total.compared += r.compared;
    total.worst_ratio = std::max(total.worst_ratio, r.worst_ratio);
    if (!r.ok && total.ok) {
      total.ok = false;
      total.message = c.name() + (pass == Pass::Forward ? " forward: " : " backward: ") + r.message;
    }
  }
  if (total.compared == 0 && total.ok) {
    // A case that compares nothing cannot fail: refuse it.
    total.ok = false;
    total.message = c.name() + ": compared no elements";
  }
  return total;
}

namespace {

class PerturbedRun : public OpRun {
 public:
  PerturbedRun(std::unique_ptr<OpRun> inner, Pass pass, int index, double factor, Tolerance tol)
      : inner_(std::move(inner)), pass_(pass), index_(index), factor_(factor), tol_(std::move(tol)) {}
  void run(Impl impl, Pass pass) override {
    inner_->run(impl, pass);
    if (impl != Impl::Fast || pass != pass_) return;
    // Move the middle element of the chosen output `factor` tolerances away from the reference.
    auto fast = inner_->outputs(Impl::Fast, pass);
    auto ref = inner_->outputs(Impl::Reference, pass);
    if (index_ >= static_cast<int>(fast.size()) || fast[index_].n == 0) return;
    const int64_t i = fast[index_].n / 2;
    const double b = ref[index_].data[i];
    const double delta = factor_ * (tol_.atol + tol_.rtol * std::abs(b));
    // Zero allowed error (bitwise cases, or a zero element under a relative tolerance): move one ulp.
    fast[index_].data[i] = delta > 0 ? static_cast<float>(b + delta)
                                     : std::nextafter(static_cast<float>(b), std::numeric_limits<float>::infinity());
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override { return inner_->outputs(impl, pass); }
  int64_t bytes(Pass pass) const override { return inner_->bytes(pass); }

 private:
  std::unique_ptr<OpRun> inner_;
  Pass pass_;
  int index_;
  double factor_;
  Tolerance tol_;
};

}  // namespace

OpCase perturbed_case(const OpCase& c, Pass pass, int output_index, double factor) {
  OpCase p = c;
  p.shape += " perturbed";
  auto make = c.make;
  auto tol = c.tol;
  p.make = [=]() -> std::unique_ptr<OpRun> {
    return std::make_unique<PerturbedRun>(make(), pass, output_index, factor, tol);
  };
  return p;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> v;
    add_linear_cases(v);
    add_layernorm_cases(v);
    add_channel_scale_cases(v);
    add_activation_cases(v);
    add_elementwise_cases(v);
    add_embedding_cases(v);
    add_dropout_cases(v);
    add_cross_entropy_cases(v);
    add_position_cases(v);
    add_row_gather_cases(v);
    return v;
  }();
  return cases;
}

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed, 77);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

std::vector<int32_t> random_ids(int64_t n, int32_t v, uint64_t seed) {
  Rng rng(seed, 78);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& x : ids) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(v)));
  return ids;
}

}  // namespace stretch::ops::testing
