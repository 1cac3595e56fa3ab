// bench/bench_optim.cpp — optimizer steps, gradient clipping and checkpoint I/O, each beside
// the bandwidth reference it should be judged against (docs/BENCHMARKS.md, "Optimizers and
// checkpoints"):
//   Copy/N           memcpy of N floats: 8·N bytes moved, the memory-bound yardstick
//   NagStep/N        nag (reads p, g, buf; writes p, buf: 20·N bytes)
//   AdamStep/N       adam (reads p, g, m, v; writes p, m, v: 28·N bytes)
//   ClipGradNorm/N   norm of N grads (reads 4·N bytes; max_norm large: no scaling pass)
//   SafetensorsSave/N, SafetensorsLoad/N   one F32 tensor of N elements (fsync included)
//   ZeroGrad         the small model's gradients (transformer_lm_small, V 10008: 33 MB) zeroed
//                    by nn::ParameterList::zero_grad and, alternately in the same iteration, one
//                    Var at a time on one thread (the form it replaced): counter serial_over_list
// Run: build/bench/bench_optim --benchmark_min_time=0.3
// Each reports bytes_per_second; compare a step's rate with Copy's in the same run.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "models/transformer_lm/transformer_lm.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "tensor/safetensors.h"

using namespace stretch;
using namespace stretch::optim;

namespace {

struct Buffers {
  std::vector<float> value, grad;
  explicit Buffers(int64_t n) : value(n, 0.5f), grad(n) {
    for (int64_t i = 0; i < n; ++i) grad[i] = 1e-3f * static_cast<float>(i % 1000) - 0.5f;
  }
  OptimParam view() { return {"w", value.data(), grad.data(), static_cast<int64_t>(value.size())}; }
};

void BM_Copy(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(n, 1.0f), b(n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 8);
}

void run_step(benchmark::State& state, OptimizerKind kind, int64_t bytes_per_elem) {
  const int64_t n = state.range(0);
  Buffers b(n);
  auto opt = make_optimizer({.kind = kind});
  OptimParam p = b.view();
  std::span<const OptimParam> ps(&p, 1);
  opt->step(ps, 1e-4);  // allocate state outside the timing
  for (auto _ : state) {
    opt->step(ps, 1e-4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * bytes_per_elem);
}

void BM_NagStep(benchmark::State& state) { run_step(state, OptimizerKind::Nag, 20); }
void BM_AdamStep(benchmark::State& state) { run_step(state, OptimizerKind::Adam, 28); }

void BM_ClipGradNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffers b(n);
  OptimParam p = b.view();
  for (auto _ : state) benchmark::DoNotOptimize(clip_grad_norm(std::span<const OptimParam>(&p, 1), 1e30));
  state.SetBytesProcessed(state.iterations() * n * 4);
}

std::string bench_path() {
  return (std::filesystem::temp_directory_path() / ("stretch_bench_" + std::to_string(::getpid()) + ".safetensors")).string();
}

void BM_SafetensorsSave(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor t = Tensor::full({n}, 0.25f);
  const std::string path = bench_path();
  for (auto _ : state) save_safetensors(path, {{"w", t}});
  std::filesystem::remove(path);
  state.SetBytesProcessed(state.iterations() * n * 4);
}

void BM_SafetensorsLoad(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::string path = bench_path();
  save_safetensors(path, {{"w", Tensor::full({n}, 0.25f)}});
  for (auto _ : state) benchmark::DoNotOptimize(load_safetensors(path).tensors.size());
  std::filesystem::remove(path);
  state.SetBytesProcessed(state.iterations() * n * 4);
}

}  // namespace

BENCHMARK(BM_Copy)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime();
BENCHMARK(BM_NagStep)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime();
BENCHMARK(BM_AdamStep)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime();
BENCHMARK(BM_ClipGradNorm)->Arg(1 << 16)->Arg(1 << 22)->UseRealTime();
BENCHMARK(BM_SafetensorsSave)->Arg(1 << 22)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SafetensorsLoad)->Arg(1 << 22)->UseRealTime()->Unit(benchmark::kMillisecond);
// Time of the one-Var-at-a-time zeroing over ParameterList::zero_grad's, measured alternately.
void BM_ZeroGrad(benchmark::State& st) {
  models::TransformerLMConfig cfg = models::preset("transformer_lm_small");
  cfg.vocab_size = 10008;
  models::TransformerLM model(cfg);
  const auto& items = model.params().items();
  for (const auto& [name, v] : items) v.grad_data();  // every gradient buffer, as after a backward
  double list = 0, serial = 0;
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    model.params().zero_grad();
    auto t1 = std::chrono::steady_clock::now();
    for (const auto& [name, v] : items) v.zero_grad();
    auto t2 = std::chrono::steady_clock::now();
    list += std::chrono::duration<double>(t1 - t0).count();
    serial += std::chrono::duration<double>(t2 - t1).count();
    st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  st.counters["serial_over_list"] = serial / list;
  st.counters["list_ms"] = 1e3 * list / static_cast<double>(st.iterations());
  st.counters["serial_ms"] = 1e3 * serial / static_cast<double>(st.iterations());
}
BENCHMARK(BM_ZeroGrad)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
