// bench/bench_ops.cpp — bandwidth of the memory-bound foundation ops, driven by the op-test
// registry's benchmark-size cases (tests/ops/op_test_registry.h): for each case and pass, the fast
// path and a memcpy moving the same number of bytes (read + write) are timed alternately in the
// same iteration. Reports GB/s of both and ratio = op GB/s / memcpy GB/s.
// (Linear is measured against raw sgemm in bench_gemm.)
//   build/bench/bench_ops
//   build/bench/bench_ops --benchmark_filter='layernorm|cross_entropy'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/op_test_registry.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace stretch::ops::testing;

// memcpy split over the OpenMP threads (so 2 threads are compared with 2-thread copies).
void parallel_copy(char* dst, const char* src, int64_t bytes) {
  const int64_t chunk = 1 << 20, chunks = (bytes + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * chunk;
    std::memcpy(dst + off, src + off, static_cast<size_t>(std::min(chunk, bytes - off)));
  }
}

void bm_case(benchmark::State& state, const OpCase* c, Pass pass, int threads) {
  stretch::set_num_threads(threads);
  auto run = c->make();
  if (pass == Pass::Backward) run->run(Impl::Fast, Pass::Forward);  // saved state for backward
  const int64_t bytes = run->bytes(pass);
  const int64_t copy_bytes = bytes / 2;  // memcpy moves 2× its size (read + write)
  std::vector<char> src(copy_bytes, 1), dst(copy_bytes, 0);
  parallel_copy(dst.data(), src.data(), copy_bytes);  // fault pages in
  run->run(Impl::Fast, pass);                         // warm up
  double t_op = 0, t_copy = 0;
  int64_t it = 0;
  for (auto _ : state) {
    for (int half = 0; half < 2; ++half) {
      const bool do_op = (half == 0) == (it % 2 == 0);
      const auto t0 = Clock::now();
      if (do_op) run->run(Impl::Fast, pass);
      else parallel_copy(dst.data(), src.data(), copy_bytes);
      (do_op ? t_op : t_copy) += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    benchmark::DoNotOptimize(dst.data());
    ++it;
    state.SetIterationTime(t_op / it);
  }
  state.counters["op_GBs"] = static_cast<double>(bytes) * it / t_op * 1e-9;
  state.counters["memcpy_GBs"] = static_cast<double>(bytes) * it / t_copy * 1e-9;
  state.counters["ratio"] = t_copy / t_op;
  state.counters["MB"] = static_cast<double>(bytes) * 1e-6;
}

void register_all() {
  for (int threads : {1, 2}) {
    for (const OpCase& c : op_cases()) {
      if (c.size != Size::Bench || c.op == "linear") continue;
      for (Pass pass : {Pass::Forward, Pass::Backward}) {
        if (pass == Pass::Backward && !c.has_backward) continue;
        std::string name = c.op + (pass == Pass::Forward ? "_fwd" : "_bwd") + "/" + c.shape + "/threads:" +
                           std::to_string(threads);
        std::replace(name.begin(), name.end(), ' ', '_');
        benchmark::RegisterBenchmark(name.c_str(), [&c, pass, threads](benchmark::State& st) {
          bm_case(st, &c, pass, threads);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
      }
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
