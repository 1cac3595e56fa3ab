// bench/bench_gemm.cpp — stretch's linear (forward + backward: 3 GEMMs + bias) against the raw
// dnnl_sgemm calls for the same three products, interleaved in the same iteration so machine
// noise hits both alike. Shapes: a d = 256 / ffn = 1024 model at B·T = 4096 (out, qkv, fc1, fc2)
// and the 33,280-word output layer. Reports GFLOP/s of each and ratio = raw time / stretch time
// (1.0 = no overhead; target ≥ 0.9).
//   build/bench/bench_gemm                       all shapes, 1 and 2 threads
//   build/bench/bench_gemm --benchmark_filter=vocab
// And library_vs_onednn/<product>: one plain fp32 product through ops::gemm() on each
// GemmLibrary route (ops/gemm.h), interleaved with the same product on oneDNN, at the small and
// medium models' training shapes (B·T = 1024 and 4096): GFLOP/s of both and ratio = oneDNN time /
// the route's time (the per-shape evidence behind the default route of CPUs without AVX-512).
//   build/bench/bench_gemm --benchmark_filter='library_vs_onednn/.*threads:2'
// And sgemm_vs_matmul/<product>: the same plain products on oneDNN's two routes, dnnl_sgemm (what
// ops::gemm() runs them on) against a matmul primitive created once (brgemm kernels on AVX-512, what
// a bias, a ReLU or bf16 inputs run on), interleaved: GFLOP/s of both and ratio = sgemm time /
// matmul time (> 1: the primitive is the faster; the evidence for keeping dnnl_sgemm, issue 18).
//   build/bench/bench_gemm --benchmark_filter='sgemm_vs_matmul/.*tokens:1024/threads:2'
// And round_dout/<N>x<O>: a bf16 backward's rounding of dout into a copy against in its own buffer.
//   build/bench/bench_gemm --benchmark_filter='round_dout/.*threads:2'
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "ops/gemm.h"
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

// Runs `first` and `second` once per iteration each, alternating which goes first so that machine
// noise hits both alike, with `before_each` (untimed) ahead of every run; reports first's time as the
// iteration time. Returns both total times.
template <class F, class G, class S = void (*)()>
std::pair<double, double> time_alternating(benchmark::State& state, const F& first, const G& second,
                                           const S& before_each = [] {}) {
  double t[2] = {0, 0};
  int64_t it = 0;
  for (auto _ : state) {
    for (int half = 0; half < 2; ++half) {
      const int which = (half == 0) == (it % 2 == 0) ? 0 : 1;
      before_each();
      const auto t0 = Clock::now();
      if (which == 0) first();
      else second();
      t[which] += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ++it;
    state.SetIterationTime(t[0] / static_cast<double>(it));
  }
  return {t[0], t[1]};
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
  const auto [t_stretch, t_raw] = time_alternating(
      state,
      [&] {
        stretch::ops::linear_forward(y.data(), x.data(), w.data(), bias ? b.data() : nullptr, d);
        stretch::ops::linear_backward(dx.data(), dw.data(), bias ? db.data() : nullptr, dy.data(), x.data(), w.data(),
                                      d);
        benchmark::DoNotOptimize(y.data());
      },
      [&] {
        raw_three_gemms(d, x.data(), w.data(), dy.data(), ry.data(), rdx.data(), rdw.data());
        benchmark::DoNotOptimize(ry.data());
      });
  const auto it = static_cast<double>(state.iterations());
  const double flops = 6.0 * N * I * O * it;
  state.counters["stretch_GFLOPs"] = flops / t_stretch * 1e-9;
  state.counters["sgemm_GFLOPs"] = flops / t_raw * 1e-9;
  state.counters["ratio"] = t_raw / t_stretch;
}

// One product C[m, n] (+)= op(A)·op(B) through ops::gemm() with `lib` against oneDNN, alternating
// which runs first. A product: fwd = x·Wᵀ (m = tokens, n = out, k = in), dx = dy·W (m = tokens,
// n = in, k = out, beta 1), dw = dyᵀ·x (m = out, n = in, k = tokens, beta 1).
void bm_library_vs_onednn(benchmark::State& state, stretch::ops::GemmParams p, stretch::ops::GemmLibrary lib,
                          int threads) {
  using stretch::ops::GemmLibrary;
  using stretch::ops::Trans;
  stretch::set_num_threads(threads);
  const int64_t a_rows = p.trans_a == Trans::Yes ? p.k : p.m, a_cols = p.trans_a == Trans::Yes ? p.m : p.k;
  const int64_t b_rows = p.trans_b == Trans::Yes ? p.n : p.k, b_cols = p.trans_b == Trans::Yes ? p.k : p.n;
  auto a = rand_vec(a_rows * a_cols, 1), b = rand_vec(b_rows * b_cols, 2);
  std::vector<float> c(p.m * p.n, 0.f);
  auto run = [&](GemmLibrary l) {
    stretch::ops::set_gemm_library(l);
    stretch::ops::gemm(p, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  };
  const auto [t_lib, t_dnn] = time_alternating(state, [&] { run(lib); }, [&] { run(GemmLibrary::OneDnn); });
  const auto it = static_cast<double>(state.iterations());
  const double flops = 2.0 * p.m * p.n * p.k * it;
  state.counters["GFLOPs"] = flops / t_lib * 1e-9;
  state.counters["onednn_GFLOPs"] = flops / t_dnn * 1e-9;
  state.counters["ratio"] = t_dnn / t_lib;
}

// One plain product C[m, n] (+)= op(A)·op(B) (the shapes of bm_library_vs_onednn) on dnnl_sgemm and
// on a matmul primitive (beta 1 as a sum post-op), alternating which runs first.
void bm_sgemm_vs_matmul(benchmark::State& state, stretch::ops::GemmParams p, int threads) {
  using stretch::ops::Trans;
  using dt = dnnl::memory::data_type;
  stretch::set_num_threads(threads);
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  const int64_t lda = ta ? p.m : p.k, ldb = tb ? p.k : p.n;
  auto a = rand_vec(p.m * p.k, 1), b = rand_vec(p.k * p.n, 2);
  std::vector<float> c(p.m * p.n, 0.f), c2(p.m * p.n, 0.f);
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md({p.m, p.k}, dt::f32, ta ? dims{1, lda} : dims{lda, 1});
  const dnnl::memory::desc b_md({p.k, p.n}, dt::f32, tb ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c_md({p.m, p.n}, dt::f32, dims{p.n, 1});
  dnnl::primitive_attr attr;
  if (p.beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(p.beta);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
  const dnnl::matmul mm(pd);
  dnnl::memory am(a_md, eng, a.data()), bm(b_md, eng, b.data()), cm(c_md, eng, c2.data());
  const auto [t_sgemm, t_mm] = time_alternating(
      state,
      [&] {
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', p.m, p.n, p.k, 1.f, a.data(), lda, b.data(), ldb, p.beta, c.data(),
                   p.n);
        benchmark::DoNotOptimize(c.data());
      },
      [&] {
        mm.execute(st, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        st.wait();
        benchmark::DoNotOptimize(c2.data());
      });
  const auto it = static_cast<double>(state.iterations());
  const double flops = 2.0 * p.m * p.n * p.k * it;
  state.counters["sgemm_GFLOPs"] = flops / t_sgemm * 1e-9;
  state.counters["matmul_GFLOPs"] = flops / t_mm * 1e-9;
  state.counters["ratio"] = t_sgemm / t_mm;
  state.SetLabel(pd.impl_info_str());
}

// round_dout/<N>x<O>: the bf16 rounding of a linear layer's output gradient dout [N, O] before its two
// backward products, into a packed copy (ops::round_to_bf16, what linear_backward did until session 29)
// against in its own buffer (ops::round_to_bf16_in_place), alternating; dout is refilled before each
// (untimed). Reports both times and ratio = copy time / in-place time (> 1: in place is the faster).
void bm_round_dout(benchmark::State& state, int64_t n, int64_t o, int threads) {
  stretch::set_num_threads(threads);
  const std::vector<float> src = rand_vec(n * o, 7);
  std::vector<float> buf(src.size());
  std::vector<uint16_t> copy(src.size());
  const auto [t_in_place, t_copy] = time_alternating(
      state, [&] { benchmark::DoNotOptimize(stretch::ops::round_to_bf16_in_place(buf.data(), n, o)); },
      [&] { stretch::ops::round_to_bf16(copy.data(), buf.data(), n, o); },
      [&] { std::copy(src.begin(), src.end(), buf.begin()); });
  const auto it = static_cast<double>(state.iterations());
  state.counters["copy_ms"] = t_copy / it * 1e3;
  state.counters["in_place_ms"] = t_in_place / it * 1e3;
  state.counters["ratio"] = t_copy / t_in_place;
}

void register_libraries() {
  for (int threads : {1, 2})
    for (const auto& [n, o] : {std::pair<int64_t, int64_t>{1024, 256}, {1024, 10008}, {4096, 1024}, {4096, 10008}}) {
      const std::string name = "round_dout/" + std::to_string(n) + "x" + std::to_string(o) +
                               "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [n, o, threads](benchmark::State& st) {
        bm_round_dout(st, n, o, threads);
      })->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
    }
  using stretch::ops::GemmLibrary;
  using stretch::ops::GemmParams;
  using stretch::ops::Trans;
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"small_out", 256, 256},    {"small_fc1", 256, 1024}, {"small_fc2", 1024, 256},
                          {"small_vocab", 256, 10008}, {"medium_out", 512, 512}, {"medium_fc1", 512, 2048},
                          {"medium_fc2", 2048, 512}};
  for (int threads : {1, 2})
    for (int64_t tokens : {1024, 4096})
      for (const Layer& l : layers)
        for (int product = 0; product < 3; ++product) {
          GemmParams p;
          const char* what = "fwd";
          if (product == 0) {
            p = {.trans_b = Trans::Yes, .m = tokens, .n = l.out, .k = l.in};
          } else if (product == 1) {
            p = {.m = tokens, .n = l.in, .k = l.out, .beta = 1.f};
            what = "dx";
          } else {
            p = {.trans_a = Trans::Yes, .m = l.out, .n = l.in, .k = tokens, .beta = 1.f};
            what = "dw";
          }
          for (GemmLibrary lib : {GemmLibrary::OpenBlas}) {  // Mixed = this on dw, oneDNN elsewhere
            const std::string name = std::string("library_vs_onednn/") + stretch::ops::gemm_library_name(lib) + "/" +
                                     l.name + "_" + what + "/tokens:" + std::to_string(tokens) +
                                     "/threads:" + std::to_string(threads);
            benchmark::RegisterBenchmark(name.c_str(), [p, lib, threads](benchmark::State& st) {
              bm_library_vs_onednn(st, p, lib, threads);
            })->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
          }
          const std::string name = std::string("sgemm_vs_matmul/") + l.name + "_" + what +
                                   "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), [p, threads](benchmark::State& st) {
            bm_sgemm_vs_matmul(st, p, threads);
          })->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
        }
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
  register_libraries();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
