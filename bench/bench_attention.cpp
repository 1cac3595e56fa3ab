// bench/bench_attention.cpp — the fused attention op (ops/attention.h) against a materialised
// attention in the same run; results and commands in docs/BENCHMARKS.md, "Fused attention".
//
//   Gemm/1024                  dnnl_sgemm 1024³ through ops::gemm: the machine's GEMM rate
//   Fused{Fwd,FwdBwd}/T/bias   the fused kernel, B·H = 8 (B = 1, H = 8), D = 64, causal
//   GemmBf16/1024              ops::gemm 1024³ under GemmPrecision::Bf16 (oneDNN bf16): the
//                              bf16 GEMM rate (where the CPU has bf16 matmul; else skipped)
//   Fused{Fwd,FwdBwd}Bf16/T/bias  the same under matmul_precision() Bf16: the kernel's bf16
//                              path where attention_bf16_supported() (else skipped); of_gemm
//                              there = cpu_GFLOPs / the bf16 GEMM's, of_fp32_gemm / the fp32 one
//   Materialised{Fwd,FwdBwd}/T the unfused formulation as fairseq/PyTorch run it: scores [T, S]
//                              = Q·Kᵀ by ops::gemm, + an explicit [T, S] ALiBi+causal mask
//                              matrix, row softmax (vectorised with the kernel's exp), P·V by
//                              ops::gemm; backward with four more
//                              GEMMs. It processes ONE (b, h) at a time (PyTorch would hold
//                              all B·H score matrices: 2 GiB at T = 8192) and recomputes P in
//                              backward, so its memory is 3·T·S floats, not B·H·T·S.
//   Reference{Fwd,FwdBwd}/512  ref:: (naive loops in double): the oracle, for scale only.
//   AlibiOverhead/T            fused fwd+bwd with ALiBi (learnable slopes) vs none, the two
//                              interleaved call by call; counter alibi_over_none = median ratio.
//   AlibiVariants/4096         fused fwd and fwd+bwd for each ALiBi variant (shapes linear, log,
//                              clipped at 256; per-layer scale; slope groups; interpolated
//                              slopes), fixed and learnable slopes, interleaved in rotated
//                              rounds; counters <case>_fwd / <case>_fb = median CPU-time ratio
//                              to fixed linear ALiBi, learn_cost_<case> = learnable / fixed
//                              (issue 15: each shape within 5%; learnable adds only the
//                              slope gradient's reduction).
//   BwdSchedule/T/H/bf16       backward, B = 1 and H heads: the split schedule (Auto) against
//                              one task per (b, h), interleaved; head_over_auto = wall-time ratio.
//   Long/32768                 fused forward, B = 1, H = 4, D = 64, ALiBi: peak resident set.
//   TrainShape/bf16/T          fused fwd + bwd at the small model's training shape (B = 8, H = 4,
//                              D = 64, causal ALiBi; T 128 and 512), fp32 (0) or bf16 (1): short
//                              rows, where the per-call packs and the diagonal tiles weigh most.
// Counters: GFLOPs = useful causal FLOP rate per wall second (4·D per visible (i, j) forward,
// 10·D backward: QKᵀ, P·V; recomputed QKᵀ, dO·Vᵀ, dV, dK, dQ), cpu_GFLOPs = the same per
// CPU-second of this process (all threads: a per-core rate that other jobs on the shared
// machine do not distort), of_gemm = cpu_GFLOPs / the GEMM's cpu_GFLOPs measured in this
// process, work_MiB = peak bytes the op allocated beyond its inputs and outputs (tensor pool +
// operator new), rss_MiB = peak resident set of the process during the benchmark. The CPU
// column is process CPU time (all threads).
//
// Run: build/bench/bench_attention   (about 2–3 minutes on 2 cores without AlibiVariants, which
// alone takes ~3.5 CPU-minutes on one thread: 7 rounds × 12 cases; --benchmark_filter=… for parts)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/transformer_lm/alibi_variants.h"
#include "models/transformer_lm/config.h"
#include "ops/alibi.h"
#include "ops/attention.h"
#include "ops/attention_precision.h"
#include "ops/attention_exp.h"  // exp_row: the same vector exp for the baseline
#include "ops/gemm.h"
#include "tensor/pool.h"

// ---- heap accounting: operator new/delete count live and peak bytes ----
namespace {
std::atomic<int64_t> g_heap_live{0}, g_heap_peak{0};
void note_alloc(size_t n) {
  const int64_t now = g_heap_live.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = g_heap_peak.load();
  while (now > peak && !g_heap_peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

// noinline: GCC 12 inlines these into std containers' (de)allocations in this file and then
// warns (-Warray-bounds, -Wmismatched-new-delete) about the 16-byte header it cannot see.
__attribute__((noinline)) void* operator new(size_t n) {
  void* p = std::malloc(n + 16);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  note_alloc(n);
  return static_cast<char*>(p) + 16;
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - 16;
  g_heap_live.fetch_sub(static_cast<int64_t>(*reinterpret_cast<size_t*>(base)));
  std::free(base);
}
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace stretch::ops {
namespace {

// ---- memory probes ----
struct MemProbe {
  int64_t heap0 = 0;
  uint64_t pool0 = 0;
  void start() {
    heap0 = g_heap_live.load();
    g_heap_peak.store(heap0);
    pool_reset_peak();
    pool0 = pool_stats().bytes_in_use;
    std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM to the current RSS
  }
  double work_mib() const {
    const double heap = static_cast<double>(g_heap_peak.load() - heap0);
    const double pool = static_cast<double>(pool_stats().peak_bytes_in_use - pool0);
    return (heap + pool) / (1024.0 * 1024.0);
  }
  static double rss_mib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;  // kB
    return -1.0;
  }
};

// Wall time and process CPU time (all threads). On this shared 2-core machine other jobs
// steal whole time slices, so rates are also given per CPU-second of this process, which is
// what the ratios in docs/BENCHMARKS.md use (thread-count independent: per core).
struct Stamp {
  std::chrono::steady_clock::time_point wall;
  double cpu;
  static double process_cpu() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  static Stamp now() { return Stamp{std::chrono::steady_clock::now(), process_cpu()}; }
  double wall_since() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(); }
  double cpu_since() const { return process_cpu() - cpu; }
};

// ---- the machine's GEMM rate (dnnl_sgemm 1024³), per CPU-second, measured once in this process ----
double gemm_cpu_gflops() {
  static const double rate = [] {
    const int64_t n = 1024;
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    GemmParams gp{.m = n, .n = n, .k = n};
    gemm(gp, a.data(), b.data(), c.data());
    std::vector<double> r;
    for (int i = 0; i < 7; ++i) {
      const double t0 = Stamp::process_cpu();
      gemm(gp, a.data(), b.data(), c.data());
      r.push_back(2.0 * n * n * n / (Stamp::process_cpu() - t0) / 1e9);
    }
    std::sort(r.begin(), r.end());
    return r[r.size() / 2];
  }();
  return rate;
}

// The same under GemmPrecision::Bf16 (A and B rounded to bf16 inside ops::gemm each call, as a
// linear layer without pre-rounded operands does).
double gemm_bf16_cpu_gflops() {
  static const double rate = [] {
    const int64_t n = 1024;
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    GemmParams gp{.m = n, .n = n, .k = n, .precision = GemmPrecision::Bf16};
    gemm(gp, a.data(), b.data(), c.data());
    std::vector<double> r;
    for (int i = 0; i < 7; ++i) {
      const double t0 = Stamp::process_cpu();
      gemm(gp, a.data(), b.data(), c.data());
      r.push_back(2.0 * n * n * n / (Stamp::process_cpu() - t0) / 1e9);
    }
    std::sort(r.begin(), r.end());
    return r[r.size() / 2];
  }();
  return rate;
}

void BM_GemmBf16(benchmark::State& st) {
  if (!bf16_matmul_supported()) {
    st.SkipWithError("no bf16 matmul on this CPU");
    return;
  }
  const int64_t n = st.range(0);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  GemmParams gp{.m = n, .n = n, .k = n, .precision = GemmPrecision::Bf16};
  const Stamp t0 = Stamp::now();
  for (auto _ : st) gemm(gp, a.data(), b.data(), c.data());
  const double flop = 2.0 * n * n * n * st.iterations();
  st.counters["GFLOPs"] = flop / t0.wall_since() / 1e9;
  st.counters["cpu_GFLOPs"] = flop / t0.cpu_since() / 1e9;
  st.counters["median_cpu_GFLOPs"] = gemm_bf16_cpu_gflops();
}

void BM_Gemm(benchmark::State& st) {
  const int64_t n = st.range(0);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  GemmParams gp{.m = n, .n = n, .k = n};
  const Stamp t0 = Stamp::now();
  for (auto _ : st) gemm(gp, a.data(), b.data(), c.data());
  const double flop = 2.0 * n * n * n * st.iterations();
  st.counters["GFLOPs"] = flop / t0.wall_since() / 1e9;
  st.counters["cpu_GFLOPs"] = flop / t0.cpu_since() / 1e9;
  st.counters["median_cpu_GFLOPs"] = gemm_cpu_gflops();
}

// ---- problem ----
enum class Bias : int { None = 0, Alibi = 1 };

struct Inputs {
  int64_t B, H, T, S, D;
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv, slopes, dslopes;
  Inputs(int64_t b, int64_t h, int64_t t, int64_t d) : B(b), H(h), T(t), S(t), D(d) {
    Rng rng(5);
    auto fill = [&](std::vector<float>& x, size_t n) {
      x.resize(n);
      for (auto& e : x) e = rng.uniform(-1.f, 1.f);
    };
    fill(q, B * H * T * D), fill(k, B * H * S * D), fill(v, B * H * S * D), fill(dout, B * H * T * D);
    out.assign(B * H * T * D, 0.f), lse.assign(B * H * T, 0.f);
    dq.assign(q.size(), 0.f), dk.assign(k.size(), 0.f), dv.assign(v.size(), 0.f);
    slopes = alibi_slopes(static_cast<int>(H));
    dslopes.assign(H, 0.f);
  }
  AttentionParams params(Bias bias) const {
    AttentionParams p{.b = B, .h = H, .t = T, .s = S, .d = D};
    if (bias == Bias::Alibi) p.bias = BiasPolicy::Alibi, p.alibi.slopes = slopes.data();
    return p;
  }
  double pairs() const { return static_cast<double>(B * H) * T * (T + 1) / 2.0; }  // causal, S = T
};

void fused_fwd(Inputs& in, const AttentionParams& p) {
  attention_forward(in.out.data(), in.lse.data(), in.q.data(), in.k.data(), in.v.data(), p);
}
void fused_bwd(Inputs& in, const AttentionParams& p, float* dslopes) {
  attention_backward(in.dq.data(), in.dk.data(), in.dv.data(), AttentionGrads{.dslopes = dslopes}, in.dout.data(),
                     in.q.data(), in.k.data(), in.v.data(), in.out.data(), in.lse.data(), p);
}

// Counters: GFLOPs per wall second, cpu_GFLOPs per CPU-second, of_gemm = cpu_GFLOPs over the
// GEMM's, work_MiB and rss_MiB from the probe.
void report(benchmark::State& st, const Inputs& in, double flop_per_pair_d, const MemProbe& mp, const Stamp& t0) {
  const double flop = flop_per_pair_d * in.D * in.pairs() * st.iterations();
  const double wall = t0.wall_since(), cpu = t0.cpu_since();
  st.counters["GFLOPs"] = flop / wall / 1e9;
  st.counters["cpu_GFLOPs"] = flop / cpu / 1e9;
  st.counters["of_gemm"] = flop / cpu / 1e9 / gemm_cpu_gflops();
  st.counters["work_MiB"] = mp.work_mib();
  st.counters["rss_MiB"] = MemProbe::rss_mib();
}

void BM_FusedFwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(static_cast<Bias>(st.range(1)));
  fused_fwd(in, p);  // warm the pool
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) fused_fwd(in, p);
  report(st, in, 4.0, mp, t0);
}

void BM_FusedFwdBwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(static_cast<Bias>(st.range(1)));
  fused_fwd(in, p);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    fused_fwd(in, p);
    fused_bwd(in, p, nullptr);
  }
  report(st, in, 14.0, mp, t0);
}

// The bf16 path: matmul precision Bf16 for the timed calls only.
struct Bf16Scope {
  Bf16Scope() { set_matmul_precision(GemmPrecision::Bf16); }
  ~Bf16Scope() { set_matmul_precision(GemmPrecision::Fp32); }
};
void report_bf16(benchmark::State& st, const Inputs& in, double flop_per_pair_d, const MemProbe& mp,
                 const Stamp& t0) {
  report(st, in, flop_per_pair_d, mp, t0);
  st.counters["of_fp32_gemm"] = st.counters["of_gemm"];
  st.counters["of_gemm"] = st.counters["cpu_GFLOPs"] / gemm_bf16_cpu_gflops();
}

void BM_FusedFwdBf16(benchmark::State& st) {
  if (!attention_bf16_supported()) {
    st.SkipWithError("no avx512_bf16: attention runs fp32 under --bf16 here");
    return;
  }
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(static_cast<Bias>(st.range(1)));
  gemm_bf16_cpu_gflops();
  const Bf16Scope scope;
  fused_fwd(in, p);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) fused_fwd(in, p);
  report_bf16(st, in, 4.0, mp, t0);
}

void BM_FusedFwdBwdBf16(benchmark::State& st) {
  if (!attention_bf16_supported()) {
    st.SkipWithError("no avx512_bf16: attention runs fp32 under --bf16 here");
    return;
  }
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(static_cast<Bias>(st.range(1)));
  gemm_bf16_cpu_gflops();
  const Bf16Scope scope;
  fused_fwd(in, p);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    fused_fwd(in, p);
    fused_bwd(in, p, nullptr);
  }
  report_bf16(st, in, 14.0, mp, t0);
}

// ---- materialised attention, one (b, h) at a time (see the header comment) ----
struct Materialised {
  std::vector<float> bias, prob, dprob;  // [T, S] each
  void head_probs(const Inputs& in, int64_t bh, const AttentionParams& p) {
    const int64_t T = in.T, S = in.S, D = in.D, h = bh % in.H;
    bias.resize(T * S), prob.resize(T * S);
    const float m = p.bias == BiasPolicy::Alibi ? in.slopes[h] : 0.f;
    // The fork's mask: −inf above the diagonal, + m·j (REFERENCE.md §1.2), materialised.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j) bias[i * S + j] = j > i ? -INFINITY : m * static_cast<float>(j);
    GemmParams gp{.trans_b = Trans::Yes, .m = T, .n = S, .k = D, .alpha = 1.f / std::sqrt(float(D))};
    gemm(gp, in.q.data() + bh * T * D, in.k.data() + bh * S * D, prob.data());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < T; ++i) {
      float* r = prob.data() + i * S;
      const float* bi = bias.data() + i * S;
      float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < S; ++j) {
        r[j] += bi[j];
        mx = std::max(mx, r[j]);
      }
      const float inv = 1.f / attn::exp_row(r, static_cast<int>(S), mx);  // the kernel's vector exp
#pragma omp simd
      for (int64_t j = 0; j < S; ++j) r[j] *= inv;
    }
  }
  void forward(Inputs& in, const AttentionParams& p) {
    const int64_t T = in.T, S = in.S, D = in.D;
    for (int64_t bh = 0; bh < in.B * in.H; ++bh) {
      head_probs(in, bh, p);
      gemm(GemmParams{.m = T, .n = D, .k = S}, prob.data(), in.v.data() + bh * S * D, in.out.data() + bh * T * D);
    }
  }
  void forward_backward(Inputs& in, const AttentionParams& p) {
    const int64_t T = in.T, S = in.S, D = in.D;
    const float scale = 1.f / std::sqrt(float(D));
    for (int64_t bh = 0; bh < in.B * in.H; ++bh) {
      head_probs(in, bh, p);
      const float *q = in.q.data() + bh * T * D, *k = in.k.data() + bh * S * D, *v = in.v.data() + bh * S * D;
      const float* dout = in.dout.data() + bh * T * D;
      gemm(GemmParams{.m = T, .n = D, .k = S}, prob.data(), v, in.out.data() + bh * T * D);
      dprob.resize(T * S);
      gemm(GemmParams{.trans_b = Trans::Yes, .m = T, .n = S, .k = D}, dout, v, dprob.data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < T; ++i) {
        float* dp = dprob.data() + i * S;
        const float* pr = prob.data() + i * S;
        float delta = 0.f;
        for (int64_t j = 0; j < S; ++j) delta += pr[j] * dp[j];
        for (int64_t j = 0; j < S; ++j) dp[j] = pr[j] * (dp[j] - delta);
      }
      gemm(GemmParams{.m = T, .n = D, .k = S, .alpha = scale, .beta = 1.f}, dprob.data(), k,
           in.dq.data() + bh * T * D);
      gemm(GemmParams{.trans_a = Trans::Yes, .m = S, .n = D, .k = T, .alpha = scale, .beta = 1.f}, dprob.data(), q,
           in.dk.data() + bh * S * D);
      gemm(GemmParams{.trans_a = Trans::Yes, .m = S, .n = D, .k = T, .beta = 1.f}, prob.data(), dout,
           in.dv.data() + bh * S * D);
    }
  }
};

void BM_MaterialisedFwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    Materialised m;
    m.forward(in, p);
  }
  report(st, in, 4.0, mp, t0);
}

void BM_MaterialisedFwdBwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    Materialised m;
    m.forward_backward(in, p);
  }
  report(st, in, 14.0, mp, t0);
}

void BM_ReferenceFwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) ref::attention_forward(in.out.data(), in.lse.data(), in.q.data(), in.k.data(), in.v.data(), p);
  report(st, in, 4.0, mp, t0);
}

void BM_ReferenceFwdBwd(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    ref::attention_forward(in.out.data(), in.lse.data(), in.q.data(), in.k.data(), in.v.data(), p);
    ref::attention_backward(in.dq.data(), in.dk.data(), in.dv.data(), AttentionGrads{}, in.dout.data(), in.q.data(),
                            in.k.data(), in.v.data(), in.out.data(), in.lse.data(), p);
  }
  report(st, in, 14.0, mp, t0);
}

// ALiBi (with learnable-slope gradient) vs none, interleaved call by call so that machine
// noise hits both; the counters are medians over iterations of the CPU-time ratio.
void BM_AlibiOverhead(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const AttentionParams none = in.params(Bias::None), alibi = in.params(Bias::Alibi);
  auto timed = [&](const AttentionParams& p, float* ds) {
    const Stamp t0 = Stamp::now();
    fused_fwd(in, p);
    fused_bwd(in, p, ds);
    return t0.cpu_since();
  };
  timed(none, nullptr), timed(alibi, in.dslopes.data());
  std::vector<double> ratio, ratio_fixed;
  for (auto _ : st) {
    const double t_none = timed(none, nullptr);
    const double t_alibi = timed(alibi, in.dslopes.data());  // learnable slopes
    const double t_fixed = timed(alibi, nullptr);            // fixed slopes (the fork)
    ratio.push_back(t_alibi / t_none);
    ratio_fixed.push_back(t_fixed / t_none);
  }
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  st.counters["alibi_learn_over_none"] = median(ratio);
  st.counters["alibi_fixed_over_none"] = median(ratio_fixed);
}

// The ALiBi variants of issue 15 against fixed linear ALiBi: each bias shape, the per-layer scale
// (top layer of linear:0.5), slope groups (4:1,4:0.5), interpolated slopes (×0.25), each with fixed
// and learnable slopes; forward and forward+backward timed separately. Slopes come from the
// model's own functions (models::alibi_layer_slopes), never computed here. One round times every
// (case, pass) once, in an order rotated by one case per round so that no case always follows
// the same neighbour; the counters are medians over rounds of the CPU-time ratio to fixed linear
// ALiBi of the same round: <case>_fwd, <case>_fb. learn_cost_<shape> = median of
// fb(learnable)/fb(fixed) for that shape (what the slope gradient's reduction adds).
struct VariantCase {
  std::string name;
  AlibiShape shape = AlibiShape::Linear;
  std::vector<float> slopes{};  // [H]
  float slope_scale = 1.f;
  bool learn = false;
};

std::vector<VariantCase> variant_cases(int64_t H) {
  auto slopes_of = [&](const std::string& groups, const std::string& layer_scale, int64_t layer) {
    models::TransformerLMConfig c;
    c.decoder_layers = 6, c.decoder_attention_heads = H;
    c.alibi_slope_groups = groups, c.alibi_layer_scale = layer_scale;
    models::validate_alibi_variants(c);
    return models::alibi_layer_slopes(c)[static_cast<size_t>(layer)];
  };
  const std::vector<float> rule = slopes_of("", "", 0);
  const std::vector<float> top = slopes_of("", "linear:0.5", 5);
  const std::vector<float> groups = slopes_of(std::to_string(H / 2) + ":1," + std::to_string(H - H / 2) + ":0.5", "", 0);
  std::vector<VariantCase> cases;
  for (bool learn : {false, true}) {
    const std::string sfx = learn ? "_learn" : "";
    cases.push_back({"linear" + sfx, AlibiShape::Linear, rule, 1.f, learn});
    cases.push_back({"log" + sfx, AlibiShape::Log, rule, 1.f, learn});
    cases.push_back({"clipped" + sfx, AlibiShape::Clipped, rule, 1.f, learn});
    cases.push_back({"layer_scale" + sfx, AlibiShape::Linear, top, 1.f, learn});
    cases.push_back({"groups" + sfx, AlibiShape::Linear, groups, 1.f, learn});
    cases.push_back({"interp" + sfx, AlibiShape::Linear, rule, 0.25f, learn});
  }
  return cases;  // cases[0] is the reference: fixed linear ALiBi with the rule's slopes
}

void BM_AlibiVariants(benchmark::State& st) {
  Inputs in(1, 8, st.range(0), 64);
  const std::vector<VariantCase> cases = variant_cases(in.H);
  const size_t n = cases.size();
  auto params = [&](const VariantCase& c) {
    AttentionParams p = in.params(Bias::Alibi);
    p.alibi.slopes = c.slopes.data();
    p.alibi.slope_scale = c.slope_scale;
    p.alibi.shape = c.shape;
    p.alibi.cap = 256.f;
    return p;
  };
  auto time_fwd = [&](const VariantCase& c) {
    const AttentionParams p = params(c);
    const Stamp t0 = Stamp::now();
    fused_fwd(in, p);
    return t0.cpu_since();
  };
  auto time_fb = [&](const VariantCase& c) {
    const AttentionParams p = params(c);
    const Stamp t0 = Stamp::now();
    fused_fwd(in, p);
    fused_bwd(in, p, c.learn ? in.dslopes.data() : nullptr);
    return t0.cpu_since();
  };
  for (const VariantCase& c : cases) time_fb(c);  // warm the pool and the tables
  std::vector<std::vector<double>> fwd(n), fb(n);  // per case: ratio to cases[0] per round
  size_t round = 0;
  for (auto _ : st) {
    std::vector<double> tf(n), tb(n);
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + round) % n;
      tf[i] = time_fwd(cases[i]);
      tb[i] = time_fb(cases[i]);
    }
    for (size_t i = 0; i < n; ++i) fwd[i].push_back(tf[i] / tf[0]), fb[i].push_back(tb[i] / tb[0]);
    ++round;
  }
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x.size() % 2 == 1 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
  };
  for (size_t i = 1; i < n; ++i) {
    st.counters[cases[i].name + "_fwd"] = median(fwd[i]);
    st.counters[cases[i].name + "_fb"] = median(fb[i]);
  }
  const size_t half = n / 2;  // cases[half + i] is cases[i] with learnable slopes
  for (size_t i = 0; i < half; ++i) {
    std::vector<double> r;
    for (size_t k = 0; k < fb[i].size(); ++k) r.push_back(fb[half + i][k] / fb[i][k]);
    st.counters["learn_cost_" + cases[i].name] = median(r);
  }
}

// The backward's split schedule against one task per (b, h) (BackwardSchedule::Head), B = 1 and
// H = range(1) heads at T = range(0), causal ALiBi (fixed slopes), fp32 or bf16 (range(2)): the two
// schedules' backward calls interleaved, wall time (the split is about idle threads, which CPU time
// does not see); counter head_over_auto = median ratio of Head's wall time to Auto's (> 1: the split
// pays), split = whether Auto split at this thread count.
void BM_BwdSchedule(benchmark::State& st) {
  const bool bf16 = st.range(2) != 0;
  if (bf16 && !attention_bf16_supported()) {
    st.SkipWithError("no avx512_bf16: attention runs fp32 under --bf16 here");
    return;
  }
  Inputs in(1, st.range(1), st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  if (bf16) set_matmul_precision(GemmPrecision::Bf16);
  fused_fwd(in, p);
  auto timed = [&](BackwardSchedule s) {
    set_attention_backward_schedule(s);
    const auto t0 = std::chrono::steady_clock::now();
    fused_bwd(in, p, nullptr);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> ratio;
  for (auto _ : st) {
    const double head = timed(BackwardSchedule::Head), autos = timed(BackwardSchedule::Auto);
    ratio.push_back(head / autos);
  }
  set_attention_backward_schedule(BackwardSchedule::Auto);
  set_matmul_precision(GemmPrecision::Fp32);
  std::sort(ratio.begin(), ratio.end());
  st.counters["head_over_auto"] = ratio[ratio.size() / 2];
  st.counters["split"] = attention_backward_splits(p, omp_get_max_threads()) ? 1 : 0;
}

void BM_Long(benchmark::State& st) {
  Inputs in(1, 4, st.range(0), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) fused_fwd(in, p);
  report(st, in, 4.0, mp, t0);
}

// The small model's training shape (see the header): range(0) = bf16, range(1) = T.
void BM_TrainShape(benchmark::State& st) {
  if (st.range(0) && !attention_bf16_supported()) {
    st.SkipWithError("no avx512_bf16: attention runs fp32 under --bf16 here");
    return;
  }
  Inputs in(8, 4, st.range(1), 64);
  const AttentionParams p = in.params(Bias::Alibi);
  std::optional<Bf16Scope> scope;
  if (st.range(0)) gemm_bf16_cpu_gflops(), scope.emplace();
  fused_fwd(in, p);
  MemProbe mp;
  mp.start();
  const Stamp t0 = Stamp::now();
  for (auto _ : st) {
    fused_fwd(in, p);
    fused_bwd(in, p, nullptr);
  }
  if (st.range(0))
    report_bf16(st, in, 14.0, mp, t0);
  else
    report(st, in, 14.0, mp, t0);
}

BENCHMARK(BM_Gemm)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_FusedFwd)->ArgsProduct({{512, 2048, 8192}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_FusedFwdBwd)->ArgsProduct({{512, 2048, 8192}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GemmBf16)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_FusedFwdBf16)->ArgsProduct({{512, 2048, 8192}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_FusedFwdBwdBf16)->ArgsProduct({{512, 2048, 8192}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_MaterialisedFwd)->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_MaterialisedFwdBwd)->Arg(512)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_ReferenceFwd)->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_ReferenceFwdBwd)->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_AlibiOverhead)->Arg(2048)->Iterations(15)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_AlibiVariants)->Arg(4096)->Iterations(7)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_BwdSchedule)->ArgsProduct({{512, 2048}, {1, 3}, {0, 1}})->Iterations(9)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TrainShape)->ArgsProduct({{0, 1}, {128, 512}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_Long)->Arg(32768)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace
}  // namespace stretch::ops

BENCHMARK_MAIN();
