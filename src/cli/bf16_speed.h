// cli/bf16_speed.h — how `--bf16` (and its aliases) computes its products on this CPU, chosen at
// startup so that a flag meant to speed a run up does not slow it down.
//
// This CPU's kind (ops::bf16_matmul_kind()):
//   Emulated  oneDNN at avx512_core / _vnni widens bf16 to fp32 FMAs itself: a small-model training
//             step 3.3-4.3x slower than fp32 (an Intel Xeon with oneDNN capped there) -> Fp32Fma;
//   Dot       avx512_core_bf16: one thread's vdpbf16ps and fp32 FMA rates are measured now
//             (core/peak_flops.h, ~0.15 s, alternating short rounds); bf16 below fp32 -> Fp32Fma (an Intel Xeon without AMX
//             exposed: 0.5x, native bf16 steps 0.56-1.04x fp32's speed); else Native (Zen 4 /
//             Zen 5: ~2x);
//   Amx       oneDNN's products run on the AMX tiles (~15x the fp32 FMA rate): native, and the
//             attention's bf16 tiles run there too (ops::attention_bf16_amx()). Where they cannot
//             (a build without the tile kernel) they use vdpbf16ps, so the two rates above are
//             measured too: below fp32 (an Intel Xeon model 167: 0.5x) -> NativeFp32Attention;
//   None: refused or falls back to fp32 earlier (cli/command.cpp).
// ops::Bf16Products::Fp32Fma keeps the flag's rounding contract (operands rounded to bf16, exact
// products, fp32 sums) at fp32's speed; the attention then runs fp32 (ops/gemm.h). The
// environment variable STRETCH_BF16_PRODUCTS=native|fp32|native-fp32-attention overrides the choice
// (another value is a usage error); native where bf16 or the attention's bf16 tiles are the slower
// is warned.
#pragma once
#include <optional>
#include <string>

#include "ops/gemm.h"

namespace stretch::cli {

struct Bf16Speed {
  ops::Bf16MatmulKind kind = ops::Bf16MatmulKind::None;
  double fp32_gflops = 0, bf16_gflops = 0;  // one thread, measured where kind is Dot or Amx; else 0
  bool attention_on_amx = false;  // the attention's bf16 tiles run on AMX (ops::attention_bf16_amx())
};

// Whether the two rates decide the choice on a CPU of this kind (Dot, Amx): there they are measured.
bool bf16_rates_decide(ops::Bf16MatmulKind kind);

// This CPU's kind, with the two rates measured where it is Dot or Amx.
Bf16Speed measure_bf16_speed();

// The choice and what to tell the user about it.
struct Bf16Choice {
  ops::Bf16Products products = ops::Bf16Products::Native;
  std::optional<std::string> info, warning;  // a line for log_info / log_warning, or none
};
// `env`: STRETCH_BF16_PRODUCTS's value (null or empty: unset); `flag`: the spelling given
// (e.g. "--bf16" or "--fp16"), named in the lines. Throws a usage Error for another env value.
Bf16Choice choose_bf16_products(const Bf16Speed& s, const char* env, const std::string& flag);

// measure_bf16_speed + choose_bf16_products (STRETCH_BF16_PRODUCTS from the environment), the
// lines logged once, and ops::set_bf16_products. For `stretch ... --bf16` and bench_model --bf16.
ops::Bf16Products apply_bf16_products(const std::string& flag);

}  // namespace stretch::cli
