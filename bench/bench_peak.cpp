// bench/bench_peak.cpp — prints this host's measured FMA peak as one JSON line (src/core/peak_flops.h):
//   bench_peak [--threads N] [--seconds S]
// {"bench": "peak", "cpu": {"model_name", "family", "model", "flags"}, "threads": N,
//  "fp32_gflops": {"1": ..., "N": ...}, "fp32_isa": "zmm" | "ymm", "fp32_ymm_gflops": {...},
//  "fp32_zmm_gflops": {...} | "none", "bf16_gflops": {...} | "none" (vdpbf16ps),
//  "bf16_amx_gflops": {...} | "none" (AMX tiles)}
// N defaults to the OpenMP thread count (all cores). bench/compare.py and bench_model divide by it.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "core/peak_flops.h"

int main(int argc, char** argv) {
  int threads = omp_get_max_threads();
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    char* end = nullptr;
    if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<int>(std::strtol(argv[++i], &end, 10));
      if (*end != '\0' || threads < 1) {
        std::fprintf(stderr, "bench_peak: --threads %s: give an integer >= 1\n", argv[i]);
        return 2;
      }
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(seconds > 0)) {
        std::fprintf(stderr, "bench_peak: --seconds %s: give a positive number (time per kernel and thread count)\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "bench_peak: unknown argument '%s' (usage: bench_peak [--threads N] [--seconds S])\n", argv[i]);
      return 2;
    }
  }
  using stretch::CpuInfo;
  const CpuInfo cpu = stretch::cpu_info();
  const stretch::Peak p = stretch::measure_peak(cpu, threads, seconds);
  const std::string n = std::to_string(threads);
  auto pair = [&](double one, double all) -> nlohmann::json {
    if (one < 0) return "none";
    return {{"1", std::round(one * 10) / 10}, {n, std::round(all * 10) / 10}};
  };
  nlohmann::json j = {{"bench", "peak"},
                      {"cpu", {{"model_name", cpu.model_name}, {"family", cpu.family}, {"model", cpu.model}, {"flags", cpu.flags}}},
                      {"threads", threads},
                      {"fp32_gflops", pair(p.fp32_1(), p.fp32_n())},
                      {"fp32_isa", p.fp32_isa()},
                      {"fp32_ymm_gflops", pair(p.fp32_ymm_1, p.fp32_ymm_n)},
                      {"fp32_zmm_gflops", pair(p.fp32_zmm_1, p.fp32_zmm_n)},
                      {"bf16_gflops", pair(p.bf16_1, p.bf16_n)},
                      {"bf16_amx_gflops", pair(p.amx_1, p.amx_n)}};
  std::cout << j.dump() << std::endl;
  return 0;
}
