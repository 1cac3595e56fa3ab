// bench/bench_step_fusions.cpp — issue 18's fusions outside GEMM, each against the form it
// replaced, timed in the same process (alternating order, CPU time of the process, best of 3
// rounds of --reps pairs), one JSON line per comparison with ratio = before / after:
//   cross_entropy  training's in-place cross-entropy, forward + backward at dloss 1 over [N, V]
//                  logits: InplaceForm::Exp (backward's scale pass over [N, V]) against
//                  InplaceForm::Softmax (the scale done while forward has the row in cache); a
//                  64 MiB read between forward and backward stands in for the GEMMs between them
//   nag_step       multiply_grads(f) + Optimizer::step(lr) against Optimizer::step(lr, f) on one
//                  parameter of --params elements (the gradients reset, untimed, before each)
// Shapes default to the small model at B 8, T 128, V 10,008 (N 1,024; 8,283,648 parameters).
//   build/bench/bench_step_fusions [--threads 1] [--reps 20]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/cross_entropy.h"
#include "ops/cross_entropy_softmax.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"

using namespace stretch;

namespace {

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// (best of 3 rounds) mean CPU seconds of before() and after(), alternating which runs first.
// setup(k) runs untimed before each call (k = 0 before, 1 after).
std::pair<double, double> time_pair(int reps, const std::function<void(int)>& setup,
                                    const std::function<void(int)>& run) {
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 3; ++round) {
    double t[2] = {0, 0};
    for (int r = 0; r < reps; ++r)
      for (int h = 0; h < 2; ++h) {
        const int k = (r % 2 == 0) ? h : 1 - h;
        setup(k);
        const double c0 = cpu_now();
        run(k);
        t[k] += cpu_now() - c0;
      }
    for (int k = 0; k < 2; ++k) best[k] = std::min(best[k], t[k] / reps);
  }
  return {best[0], best[1]};
}

void print(const char* name, const std::string& shape, std::pair<double, double> t) {
  std::printf("{\"bench\":\"%s\",\"shape\":\"%s\",\"threads\":%d,\"before_ms\":%.3f,\"after_ms\":%.3f,\"ratio\":%.3f}\n",
              name, shape.c_str(), num_threads(), t.first * 1e3, t.second * 1e3, t.first / t.second);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 20;
  int64_t n = 1024, v = 10008, params = 8283648;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t x = std::atoll(argv[i + 1]);
    if (a == "--threads") threads = static_cast<int>(x);
    else if (a == "--reps") reps = static_cast<int>(x);
    else if (a == "--rows") n = x;
    else if (a == "--vocab") v = x;
    else if (a == "--params") params = x;
    else {
      std::fprintf(stderr, "bench_step_fusions: unknown flag %s (--threads, --reps, --rows, --vocab, --params)\n",
                   a.c_str());
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0 || threads < 1 || reps < 1 || n < 1 || v < 1 || params < 1) {
    std::fprintf(stderr, "bench_step_fusions: flags come in pairs with positive values\n");
    return 2;
  }
  set_num_threads(threads);

  {  // cross-entropy, in place, both forms
    const ops::CrossEntropyDims d{.n = n, .v = v, .ignore_index = 1, .reduction = ops::Reduction::Sum};
    std::vector<float> logits(static_cast<size_t>(n * v)), x(logits.size()), inv(static_cast<size_t>(n));
    std::vector<int32_t> targets(static_cast<size_t>(n));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 2654435761u) % 1000) / 125.f - 4.f;
    for (int64_t r = 0; r < n; ++r) targets[r] = static_cast<int32_t>((r * 7919) % v);
    std::vector<float> evict(64 << 18, 1.f);  // 64 MiB
    volatile float sink = 0;
    auto t = time_pair(
        reps, [&](int) { std::copy(logits.begin(), logits.end(), x.begin()); },
        [&](int k) {
          const ops::InplaceForm form = k == 0 ? ops::InplaceForm::Exp : ops::InplaceForm::Softmax;
          const ops::CrossEntropyResult r =
              ops::cross_entropy_forward_inplace(x.data(), inv.data(), nullptr, nullptr, targets.data(), d, form);
          float s = 0;
          for (size_t i = 0; i < evict.size(); i += 16) s += evict[i];
          sink = sink + s;
          ops::cross_entropy_backward_inplace(x.data(), inv.data(), targets.data(), 1.f, r.count, d, form);
        });
    print("cross_entropy", "N=" + std::to_string(n) + " V=" + std::to_string(v), t);
  }
  {  // NAG with the gradient scale
    std::vector<float> value(static_cast<size_t>(params), 0.5f), grad(value.size());
    optim::OptimParam p{"w", value.data(), grad.data(), params};
    std::vector<optim::OptimParam> ps{p};
    auto opt = optim::make_optimizer({.kind = optim::OptimizerKind::Nag, .momentum = 0.99});
    const double f = 1.0 / 1024;
    auto t = time_pair(
        reps, [&](int) { std::fill(grad.begin(), grad.end(), 0.01f); },
        [&](int k) {
          if (k == 0) {
            optim::multiply_grads(ps, f);
            opt->step(ps, 1e-3);
          } else {
            opt->step(ps, 1e-3, f);
          }
        });
    print("nag_step", "params=" + std::to_string(params), t);
  }
  return 0;
}
