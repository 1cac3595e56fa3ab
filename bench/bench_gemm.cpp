// bench/bench_gemm.cpp — stretch's linear (forward + backward: 3 GEMMs + bias) against the raw
// dnnl_sgemm calls for the same three products, interleaved in the same iteration so machine
// noise hits both alike. Shapes: a d = 256 / ffn = 1024 model at B·T = 4096 (out, qkv, fc1, fc2)
// and the 33,280-word output layer. Reports GFLOP/s of each and ratio = raw time / stretch time
// (1.0 = no overhead; target ≥ 0.9).
//   build/bench/bench_gemm                       all shapes, 1 and 2 threads
//   build/bench/bench_gemm --benchmark_filter=vocab
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/linear.h"

namespace {

using Clock = std::chrono::steady_clock;
using stretch::ops::LinearDims;

std::vector<float> rand_vec(int64_t n, uint64_t seed) {
  stretch::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(-1.f, 1.f);
  return v;
}

void raw_three_gemms(const LinearDims& d, const float* x, const float* w, const float* dy, float* y, float* dx,
                     float* dw) {
  const int64_t N = d.n, I = d.in_features, O = d.out_features;
  dnnl_sgemm('N', 'T', N, O, I, 1.f, x, I, w, I, 0.f, y, O);   // y = x·Wᵀ
  dnnl_sgemm('N', 'N', N, I, O, 1.f, dy, O, w, I, 1.f, dx, I);  // dx += dy·W
  dnnl_sgemm('T', 'N', O, I, N, 1.f, dy, O, x, I, 1.f, dw, I);  // dW += dyᵀ·x
}

void bm_linear_vs_sgemm(benchmark::State& state, LinearDims d, bool bias, int threads) {
  stretch::set_num_threads(threads);
  const int64_t N = d.n, I = d.in_features, O = d.out_features;
  auto x = rand_vec(N * I, 1), w = rand_vec(O * I, 2), b = rand_vec(O, 3), dy = rand_vec(N * O, 4);
  std::vector<float> y(N * O), dx(N * I, 0.f), dw(O * I, 0.f), db(O, 0.f), ry(N * O), rdx(N * I, 0.f), rdw(O * I, 0.f);
  double t_stretch = 0, t_raw = 0;
  int64_t it = 0;
  for (auto _ : state) {
    for (int half = 0; half < 2; ++half) {
      const bool do_stretch = (half == 0) == (it % 2 == 0);  // alternate which goes first
      const auto t0 = Clock::now();
      if (do_stretch) {
        stretch::ops::linear_forward(y.data(), x.data(), w.data(), bias ? b.data() : nullptr, d);
        stretch::ops::linear_backward(dx.data(), dw.data(), bias ? db.data() : nullptr, dy.data(), x.data(), w.data(),
                                      d);
      } else {
        raw_three_gemms(d, x.data(), w.data(), dy.data(), ry.data(), rdx.data(), rdw.data());
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      (do_stretch ? t_stretch : t_raw) += s;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(ry.data());
    ++it;
    state.SetIterationTime(t_stretch / it);
  }
  const double flops = 6.0 * N * I * O * it;
  state.counters["stretch_GFLOPs"] = flops / t_stretch * 1e-9;
  state.counters["sgemm_GFLOPs"] = flops / t_raw * 1e-9;
  state.counters["ratio"] = t_raw / t_stretch;
}

void register_all() {
  struct S {
    const char* name;
    int64_t i, o;
    bool bias;
  };
  const S shapes[] = {{"out_256x256", 256, 256, true},
                      {"qkv_256x768", 256, 768, true},
                      {"fc1_256x1024", 256, 1024, true},
                      {"fc2_1024x256", 1024, 256, true},
                      {"vocab_256x33280", 256, 33280, false}};
  for (int threads : {1, 2}) {
    for (const S& s : shapes) {
      const LinearDims d{.n = 4096, .in_features = s.i, .out_features = s.o};
      auto* bm = benchmark::RegisterBenchmark(
          (std::string("linear_fwd_bwd_vs_sgemm/") + s.name + "/threads:" + std::to_string(threads)).c_str(),
          [d, s, threads](benchmark::State& st) { bm_linear_vs_sgemm(st, d, s.bias, threads); });
      bm->UseManualTime()->Unit(benchmark::kMillisecond);
      if (s.o > 10000) bm->Iterations(3);
      else bm->MinTime(1.0);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
