// ops/channel_scale_cpu.cpp — channel_scale: the scales expanded to [C] once per call, then
// OpenMP over rows with a SIMD inner loop; the scales' gradient through cpu::reduce_rows
// (per-channel partials [C], then summed per group in channel order).
#include <algorithm>

#include "core/error.h"
#include "ops/channel_scale.h"
#include "ops/cpu_util.h"

namespace stretch::ops {
namespace {

void check_dims(const ChannelScaleDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.c > 0 && d.group > 0 && d.c % d.group == 0,
                "channel_scale dims n=" << d.n << " c=" << d.c << " group=" << d.group);
}

// w [C / G] -> [C]
void expand(float* out, const float* w, const ChannelScaleDims& d) {
  for (int64_t c = 0; c < d.c; ++c) out[c] = w[c / d.group];
}

}  // namespace

void channel_scale_forward(float* y, const float* x, const float* w, const ChannelScaleDims& d) {
  check_dims(d);
  const int64_t C = d.c;
  cpu::Scratch scales(C);
  float* __restrict s = scales.data();
  expand(s, w, d);
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
  for (int64_t n = 0; n < d.n; ++n) {
    const float* __restrict xr = x + n * C;
    float* __restrict yr = y + n * C;  // a fresh buffer (autograd never writes in place here)
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * s[c];
  }
}

void channel_scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                            const ChannelScaleDims& d, GradInit dx_init) {
  check_dims(d);
  const int64_t C = d.c;
  if (dx) {
    cpu::Scratch scales(C);
    float* __restrict s = scales.data();
    expand(s, w, d);
    const bool overwrite = dx_init == GradInit::Overwrite;
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
    for (int64_t n = 0; n < d.n; ++n) {
      const float* __restrict g = dy + n * C;
      float* __restrict o = dx + n * C;
      if (overwrite) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) o[c] = g[c] * s[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) o[c] += g[c] * s[c];
      }
    }
  }
  if (!dw) return;
  cpu::Scratch per_channel(C);
  float* pc = per_channel.data();
  std::fill(pc, pc + C, 0.f);
  cpu::reduce_rows(pc, d.n, C, [&](int64_t n, float* __restrict acc) {
    const float* __restrict g = dy + n * C;
    const float* __restrict xr = x + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) acc[c] += g[c] * xr[c];
  });
  for (int64_t c = 0; c < C; ++c) dw[c / d.group] += pc[c];
}

}  // namespace stretch::ops
