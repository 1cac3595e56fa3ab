// bench/bench_gemm_bf16_layout.cpp — where oneDNN's bf16 matmul loses at 2 threads, and whether
// handing it B already in its blocked layout would pay. The small model's GEMMs (B·T = 1024 rows,
// C 256, F 1024, V 10,008: forward x·Wᵀ, dX = g·W, dW = gᵀ·x of qkv, out, fc1, fc2 and the vocabulary
// layer), each timed four ways in one process, alternated call by call, median wall time per way:
//   plain    B as stored (bf16, row-major): the matmul copies it into its blocked layout itself,
//            on each thread for the rows of C that thread computes (what ops::gemm does today);
//   blocked  B already in the layout the primitive picks for weights "any" (the copy left out);
//   round    stretch's path: fp32 B rounded to plain bf16 (ops::round_to_bf16), then plain;
//   reorder  fp32 B reordered into the blocked bf16 layout by a oneDNN reorder, then blocked:
//            what fusing the rounding into the blocking would cost.
// Prints GFLOP/s per way and the speed ratios blocked / plain and reorder / round (> 1: the
// blocked way is faster), for 1 and 2 threads, and the same over all 15 by their summed times.
// Run: build/bench/bench_gemm_bf16_layout [reps]   (a plain program, ~30 s; needs avx512_bf16 or
// AMX for a meaningful bf16 rate, and refuses to run where oneDNN has no bf16 matmul at all).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/gemm.h"

namespace {

using dnnl::memory;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool ta, tb;  // A stored transposed ([K, M]); B stored transposed ([N, K], a weight [O, I])
};

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  double plain, blocked, round, reorder;  // median seconds per call
};

Row measure(dnnl::engine& eng, dnnl::stream& st, const Shape& s, int reps) {
  using dt = memory::data_type;
  const memory::desc a_md({s.m, s.k}, dt::bf16, s.ta ? memory::dims{1, s.m} : memory::dims{s.k, 1});
  const memory::dims b_strides = s.tb ? memory::dims{1, s.k} : memory::dims{s.n, 1};
  const memory::desc b_plain({s.k, s.n}, dt::bf16, b_strides), b_f32({s.k, s.n}, dt::f32, b_strides);
  const memory::desc b_any({s.k, s.n}, dt::bf16, memory::format_tag::any);
  const memory::desc c_md({s.m, s.n}, dt::f32, memory::dims{s.n, 1});
  const dnnl::matmul::primitive_desc pd_plain(dnnl::matmul::desc(a_md, b_plain, c_md), eng);
  const dnnl::matmul::primitive_desc pd_blocked(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  const dnnl::matmul mm_plain(pd_plain), mm_blocked(pd_blocked);
  memory a(a_md, eng), bp(b_plain, eng), bb(pd_blocked.weights_desc(), eng), bf(b_f32, eng), c(c_md, eng);
  // Inputs in [-1, 1): fp32 B random; bf16 A and B its rounding.
  std::vector<float> a32(static_cast<size_t>(s.m * s.k));
  stretch::Rng rng(12345);
  for (auto& e : a32) e = rng.uniform(-1.f, 1.f);
  float* b32 = static_cast<float*>(bf.get_data_handle());
  for (int64_t i = 0; i < s.k * s.n; ++i) b32[i] = rng.uniform(-1.f, 1.f);
  stretch::ops::round_to_bf16(static_cast<uint16_t*>(a.get_data_handle()), a32.data(), 1, s.m * s.k);
  stretch::ops::round_to_bf16(static_cast<uint16_t*>(bp.get_data_handle()), b32, 1, s.k * s.n);
  const dnnl::reorder ro(bf, bb);
  ro.execute(st, bf, bb);
  st.wait();
  auto run = [&](int way) {
    const auto t0 = Clock::now();
    if (way == 2) stretch::ops::round_to_bf16(static_cast<uint16_t*>(bp.get_data_handle()), b32, 1, s.k * s.n);
    if (way == 3) ro.execute(st, bf, bb);
    if (way == 0 || way == 2)
      mm_plain.execute(st, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, bp}, {DNNL_ARG_DST, c}});
    else
      mm_blocked.execute(st, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, bb}, {DNNL_ARG_DST, c}});
    st.wait();
    return seconds(t0);
  };
  std::vector<double> t[4];
  for (int way = 0; way < 4; ++way) run(way);  // warm the primitives and the pages
  for (int r = 0; r < reps; ++r)
    for (int i = 0; i < 4; ++i) {
      const int way = r % 2 ? 3 - i : i;
      t[way].push_back(run(way));
    }
  return {median(t[0]), median(t[1]), median(t[2]), median(t[3])};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  if (argc > 2 || reps < 1) {
    std::fprintf(stderr, "usage: bench_gemm_bf16_layout [reps >= 1] (got '%s')\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  if (!stretch::ops::bf16_matmul_supported()) {
    std::fprintf(stderr, "bench_gemm_bf16_layout: oneDNN has no bf16 matmul on this CPU (%s); it needs AVX-512 "
                 "or AVX512_BF16 / AMX\n", stretch::ops::cpu_isa_summary().c_str());
    return 2;
  }
  const int64_t N = 1024, C = 256, F = 1024, V = 10008;
  const Shape shapes[] = {
      {"qkv fwd", N, 3 * C, C, false, true},  {"qkv dX", N, C, 3 * C, false, false}, {"qkv dW", 3 * C, C, N, true, false},
      {"out fwd", N, C, C, false, true},      {"out dX", N, C, C, false, false},     {"out dW", C, C, N, true, false},
      {"fc1 fwd", N, F, C, false, true},      {"fc1 dX", N, C, F, false, false},     {"fc1 dW", F, C, N, true, false},
      {"fc2 fwd", N, C, F, false, true},      {"fc2 dX", N, F, C, false, false},     {"fc2 dW", C, F, N, true, false},
      {"vocab fwd", N, V, C, false, true},    {"vocab dX", N, C, V, false, false},   {"vocab dW", V, C, N, true, false},
  };
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("| threads | GEMM | M × N × K | GFLOP/s plain / blocked / round + plain / reorder + blocked | "
              "**blocked / plain** | **reorder / round** |\n|---|---|---|---|---|---|\n");
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    double tot[4] = {0, 0, 0, 0};
    for (const Shape& s : shapes) {
      const Row r = measure(eng, st, s, reps);
      const double gf = 2.0 * static_cast<double>(s.m * s.n * s.k) / 1e9;
      tot[0] += r.plain, tot[1] += r.blocked, tot[2] += r.round, tot[3] += r.reorder;
      std::printf("| %d | %s | %lld × %lld × %lld | %.0f / %.0f / %.0f / %.0f | **%.3f** | **%.3f** |\n", threads,
                  s.name, static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                  gf / r.plain, gf / r.blocked, gf / r.round, gf / r.reorder, r.plain / r.blocked,
                  r.round / r.reorder);
    }
    std::printf("| %d | all 15, time-weighted | | | **%.3f** | **%.3f** |\n", threads, tot[0] / tot[1], tot[2] / tot[3]);
  }
  return 0;
}
