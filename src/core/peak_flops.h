// core/peak_flops.h — the machine's own FMA peak, measured in the run that uses it, so that every
// MFU / fraction of peak is against this host and not a constant from another CPU (issue 18): the
// benchmarks (bench_peak, bench_model) and `stretch info` (the fp32 and bf16 rates side by side).
// Contract: measure_peak(threads, seconds) runs, on 1 thread and on `threads` threads (OpenMP,
// one timed region each, best of 5), chains of independent FMAs that keep the FMA pipes full:
//   fp32  vfmadd231ps on zmm where the CPU has avx512f, and on ymm (avx2 + fma) always; the
//         peak is the faster width (Zen 4 runs zmm at the ymm rate, Zen 5 at twice it);
//   bf16  vdpbf16ps on zmm (2 bf16 products + add per fp32 lane = 4 FLOP) where the CPU has
//         avx512_bf16; none otherwise (-1);
//   amx   tdpbf16ps on AMX tiles (core/peak_amx.h) where the CPU has amx_bf16 and amx_tile and Linux
//         grants the tiles; none otherwise (-1). oneDNN's bf16 products run there on such a CPU.
// 12 accumulators cover 2 pipes × 4-6 cycles of latency. The kernels carry their own target
// attributes, so a -march=native build on an AVX2 host still has the zmm code (never run there),
// and are neither instrumented in sanitizer builds (they touch no memory) nor left rolled at -O1
// (the sanitizer builds' level; unrolled, the 12 accumulators live in registers): otherwise GCC's
// -O1 kept the accumulators on the stack and measured 4-9 GFLOP/s, and a ratio of bf16 to fp32 that
// was not the CPU's (1.31 where the CPU's is 0.49), so --bf16 chose otherwise than in Release.
// cpu_info() reads /proc/cpuinfo: model name, family, model, and the flags that matter here.
#pragma once
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/peak_amx.h"

namespace stretch {

struct CpuInfo {
  std::string model_name{};
  int family = -1, model = -1;
  std::vector<std::string> flags{};  // of avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile, as present
  bool has(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
};

inline CpuInfo cpu_info() {
  CpuInfo c;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::vector<std::string> all;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (!c.model_name.empty()) break;  // the first processor's block is enough
      continue;
    }
    std::string key = line.substr(0, colon), value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == "model name") c.model_name = value;
    if (key == "cpu family") c.family = std::stoi(value);
    if (key == "model") c.model = std::stoi(value);
    if (key == "flags") {
      std::istringstream f(value);
      for (std::string w; f >> w;) all.push_back(w);
    }
  }
  for (const char* f : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
    if (std::find(all.begin(), all.end(), f) != all.end()) c.flags.push_back(f);
  return c;
}

// Whether amx_chain can run here: the CPU's flags, a build with the kernel, and Linux's grant.
inline bool cpu_has_usable_amx(const CpuInfo& c) {
  return kAmxBuilt && c.has("amx_bf16") && c.has("amx_tile") && amx_tiles_permitted();
}

// One thread's chain: `iters` rounds of 12 FMAs; returns a value that depends on every result.
__attribute__((target("avx2,fma"), no_sanitize("address", "undefined", "thread"))) inline float fma_chain_ymm(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + 1e-3f * i);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"), no_sanitize("address", "undefined", "thread"))) inline float fma_chain_zmm(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-3f * i);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0] + lanes[15];  // (_mm512_reduce_add_ps warns under GCC 12's -Wuninitialized)
}

__attribute__((target("avx512f,avx512bf16"), no_sanitize("address", "undefined", "thread"))) inline float dpbf16_chain_zmm(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1e-3f * i);
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(-1e-3f), _mm512_set1_ps(1e-3f));
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return lanes[0] + lanes[15];  // (_mm512_reduce_add_ps warns under GCC 12's -Wuninitialized)
}

enum class PeakKernel : uint8_t { Fp32Ymm, Fp32Zmm, Bf16Zmm, Bf16Amx };

// FLOP per chain round (12 instructions) of each kernel.
inline double peak_flop_per_round(PeakKernel k) {
  switch (k) {
    case PeakKernel::Fp32Ymm: return 12.0 * 8 * 2;
    case PeakKernel::Fp32Zmm: return 12.0 * 16 * 2;
    case PeakKernel::Bf16Zmm: return 12.0 * 16 * 4;
    case PeakKernel::Bf16Amx: return kAmxFlopPerRound;
  }
  return 0;
}

// GFLOP/s of `threads` threads running the kernel at once: best of 5 regions of ~seconds/5 each.
inline double peak_gflops(PeakKernel k, int threads, double seconds) {
  auto run = [k](int64_t iters) {
    switch (k) {
      case PeakKernel::Fp32Ymm: return fma_chain_ymm(iters);
      case PeakKernel::Fp32Zmm: return fma_chain_zmm(iters);
      case PeakKernel::Bf16Zmm: return dpbf16_chain_zmm(iters);
      case PeakKernel::Bf16Amx: return amx_chain(iters, 0x3580, 0x3580);  // bf16 2^-20: no sum overflows
    }
    return 0.0f;
  };
  // Calibrate the rounds for one region on one thread.
  int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float sink = run(iters);
    (void)sink;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > seconds / 20 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * (seconds / 5) / std::max(dt, 1e-9)) + 1;
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    float sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += run(iters);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float sink = sum;
    (void)sink;
    best = std::max(best, peak_flop_per_round(k) * static_cast<double>(iters) * threads / dt / 1e9);
  }
  return best;
}

struct Peak {
  int threads = 1;
  double fp32_ymm_1 = 0, fp32_ymm_n = 0;   // GFLOP/s, 1 thread / `threads`
  double fp32_zmm_1 = -1, fp32_zmm_n = -1; // -1: no avx512f
  double bf16_1 = -1, bf16_n = -1;         // -1: no avx512_bf16 ("none")
  double amx_1 = -1, amx_n = -1;           // bf16 on AMX tiles; -1: no AMX, or Linux refused the tiles
  // The CPU's bf16 peak: AMX's where it has AMX (oneDNN's bf16 products run there), else vdpbf16ps's.
  double bf16_peak_1() const { return amx_1 > 0 ? amx_1 : bf16_1; }
  double bf16_peak_n() const { return amx_n > 0 ? amx_n : bf16_n; }
  double fp32_1() const { return std::max(fp32_ymm_1, fp32_zmm_1); }
  double fp32_n() const { return std::max(fp32_ymm_n, fp32_zmm_n); }
  const char* fp32_isa() const { return fp32_zmm_1 > fp32_ymm_1 ? "zmm" : "ymm"; }  // the width of fp32_1()
};

inline Peak measure_peak(const CpuInfo& cpu, int threads, double seconds) {
  Peak p;
  p.threads = threads;
  p.fp32_ymm_1 = peak_gflops(PeakKernel::Fp32Ymm, 1, seconds);
  p.fp32_ymm_n = threads == 1 ? p.fp32_ymm_1 : peak_gflops(PeakKernel::Fp32Ymm, threads, seconds);
  if (cpu.has("avx512f")) {
    p.fp32_zmm_1 = peak_gflops(PeakKernel::Fp32Zmm, 1, seconds);
    p.fp32_zmm_n = threads == 1 ? p.fp32_zmm_1 : peak_gflops(PeakKernel::Fp32Zmm, threads, seconds);
  }
  if (cpu.has("avx512_bf16")) {
    p.bf16_1 = peak_gflops(PeakKernel::Bf16Zmm, 1, seconds);
    p.bf16_n = threads == 1 ? p.bf16_1 : peak_gflops(PeakKernel::Bf16Zmm, threads, seconds);
  }
  if (cpu_has_usable_amx(cpu)) {
    p.amx_1 = peak_gflops(PeakKernel::Bf16Amx, 1, seconds);
    p.amx_n = threads == 1 ? p.amx_1 : peak_gflops(PeakKernel::Bf16Amx, threads, seconds);
  }
  return p;
}

}  // namespace stretch
