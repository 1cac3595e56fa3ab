// bench/bench_rng.cpp — the dropout masks' random words: philox4x32_blocks (the SIMD form: 16 lanes
// with AVX-512, 8 with AVX2) against the scalar philox4x32 per counter, in the same run; both give
// the same words (tests/core/test_rng.cpp). docs/BENCHMARKS.md, "Zen 3: the backward products …".
//   OMP_NUM_THREADS=1 build/bench/bench_rng
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace {

constexpr int64_t kBlocks = 4096;  // counters per call (16 Ki words: a 64-key tile row block's masks many times)

void BM_PhiloxBlocks(benchmark::State& state) {
  std::vector<uint32_t> out(4 * kBlocks);
  uint64_t lo = 0;
  for (auto _ : state) {
    stretch::philox4x32_blocks(123, 456, lo, kBlocks, out.data());
    lo += kBlocks;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_counter"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBlocks), benchmark::Counter::kIsRate |
                                                                                 benchmark::Counter::kInvert);
}

void BM_PhiloxScalar(benchmark::State& state) {
  std::vector<uint32_t> out(4 * kBlocks);
  uint64_t lo = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kBlocks; ++i) {
      const auto r = stretch::philox4x32(123, 456, lo + static_cast<uint64_t>(i));
      for (int j = 0; j < 4; ++j) out[static_cast<size_t>(4 * i + j)] = r[j];
    }
    lo += kBlocks;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns_per_counter"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBlocks), benchmark::Counter::kIsRate |
                                                                                 benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_PhiloxBlocks);
BENCHMARK(BM_PhiloxScalar);
BENCHMARK_MAIN();
