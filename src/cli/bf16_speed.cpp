#include "cli/bf16_speed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/peak_flops.h"
#include "ops/attention_precision.h"

namespace stretch::cli {
namespace {

// Whether the measured dot-product rate is below the fp32 FMA rate (false where nothing was measured).
bool dot_is_slower(const Bf16Speed& s) { return s.fp32_gflops > 0 && s.bf16_gflops > 0 && s.bf16_gflops < s.fp32_gflops; }

// Whether bf16 products are slower than fp32 ones here: Emulated, or Dot with a measured ratio below 1.
bool bf16_is_slower(const Bf16Speed& s) {
  return s.kind == ops::Bf16MatmulKind::Emulated || (s.kind == ops::Bf16MatmulKind::Dot && dot_is_slower(s));
}

std::string dot_ratio(const Bf16Speed& s) {
  char r[32];
  std::snprintf(r, sizeof r, "%.2fx", s.bf16_gflops / s.fp32_gflops);
  return std::string("this CPU's bf16 dot product runs at ") + r + " its fp32 FMA rate (measured now, 1 thread)";
}

// Why bf16 is the slower here, for the lines below (s must be bf16_is_slower).
std::string why_slower(const Bf16Speed& s) {
  if (s.kind == ops::Bf16MatmulKind::Emulated)
    return "oneDNN has no native bf16 kernels here (" + ops::cpu_isa_summary() +
           ") and emulates bf16 products with fp32 FMAs, several times slower than fp32 products";
  return dot_ratio(s);
}

// Whether the attention's bf16 tiles run at the dot product's rate, slower than fp32 FMAs, on an
// AMX CPU (where they do not run on the tiles themselves).
bool amx_dot_is_slower(const Bf16Speed& s) {
  return s.kind == ops::Bf16MatmulKind::Amx && !s.attention_on_amx && dot_is_slower(s);
}

}  // namespace

bool bf16_rates_decide(ops::Bf16MatmulKind kind) {
  return kind == ops::Bf16MatmulKind::Dot || kind == ops::Bf16MatmulKind::Amx;
}

Bf16Speed measure_bf16_speed() {
  Bf16Speed s;
  s.kind = ops::bf16_matmul_kind();
  s.attention_on_amx = ops::attention_bf16_amx();
  if (!bf16_rates_decide(s.kind)) return s;
  // avx512_core_bf16 implies avx512f, and zmm FMAs run at least at the ymm rate on every such CPU.
  // The two kernels alternate in short rounds and each keeps its best: on a busy host one long
  // measurement of each could land in a loaded stretch for one kernel only and flip the ratio
  // (seen with two compilers running: 2 of 6 runs); the ratios that matter are ~0.5 and ~2.
  for (int round = 0; round < 6; ++round) {
    s.bf16_gflops = std::max(s.bf16_gflops, peak_gflops(PeakKernel::Bf16Zmm, 1, 0.01));
    s.fp32_gflops = std::max(s.fp32_gflops, peak_gflops(PeakKernel::Fp32Zmm, 1, 0.01));
  }
  return s;
}

Bf16Choice choose_bf16_products(const Bf16Speed& s, const char* env, const std::string& flag) {
  const std::string e = env ? env : "";
  ops::Bf16Products forced = ops::Bf16Products::Native;
  if (!e.empty() && !ops::parse_bf16_products(e, &forced))
    throw Error(ErrorKind::Usage, "STRETCH_BF16_PRODUCTS=" + e + " is not a way to compute bf16 products",
                "use STRETCH_BF16_PRODUCTS=native, fp32 or native-fp32-attention, or unset it for this CPU's choice (" +
                    flag + ")");
  const bool slower = bf16_is_slower(s), amx_dot_slower = amx_dot_is_slower(s);
  Bf16Choice c;
  c.products = !e.empty()       ? forced
               : slower         ? ops::Bf16Products::Fp32Fma
               : amx_dot_slower ? ops::Bf16Products::NativeFp32Attention
                                : ops::Bf16Products::Native;
  if (c.products == ops::Bf16Products::NativeFp32Attention && !e.empty()) {
    c.info = flag + ": bf16 products on oneDNN's kernels, the attention in fp32 (STRETCH_BF16_PRODUCTS=" + e + ")";
  } else if (c.products == ops::Bf16Products::NativeFp32Attention) {
    c.info = flag + ": bf16 products on oneDNN's AMX kernels, the attention in fp32: " + dot_ratio(s) +
             ", and the attention's bf16 tiles use it; STRETCH_BF16_PRODUCTS=native runs them in bf16";
  } else if (c.products == ops::Bf16Products::Native && amx_dot_slower) {
    c.warning = flag + " with STRETCH_BF16_PRODUCTS=native: " + dot_ratio(s) +
                ", so the attention's bf16 tiles are slower than fp32 ones here; unset STRETCH_BF16_PRODUCTS to run "
                "the attention in fp32 (the products stay on AMX)";
  } else if (c.products == ops::Bf16Products::Fp32Fma) {
    c.info = flag + ": bf16 products run as fp32 FMAs on bf16-rounded operands (the same rounding, exact products, "
                    "fp32 sums; the attention in fp32)" +
             (slower ? ": " + why_slower(s) : std::string(" (STRETCH_BF16_PRODUCTS=fp32)")) +
             (e.empty() ? "; STRETCH_BF16_PRODUCTS=native uses oneDNN's bf16 kernels" : "");
  }
  if (slower && c.products != ops::Bf16Products::Fp32Fma)  // forced by the variable
    c.warning = flag + " with STRETCH_BF16_PRODUCTS=" + e + ": " + why_slower(s) +
                ", so bf16 products are slower than fp32 ones here; unset STRETCH_BF16_PRODUCTS to run them "
                "as fp32 FMAs on bf16-rounded operands";
  return c;
}

ops::Bf16Products apply_bf16_products(const std::string& flag) {
  const Bf16Choice c = choose_bf16_products(measure_bf16_speed(), std::getenv("STRETCH_BF16_PRODUCTS"), flag);
  if (c.info) log_once(LogLevel::Info, *c.info);
  if (c.warning) log_once(LogLevel::Warning, *c.warning);
  ops::set_bf16_products(c.products);
  return c.products;
}

}  // namespace stretch::cli
