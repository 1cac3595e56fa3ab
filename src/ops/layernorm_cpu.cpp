// ops/layernorm_cpu.cpp — LayerNorm fast path: OpenMP over rows, vectorised inner loops over C.
// Row statistics in float, one pass with a shifted variance (stable for rows with a large mean).
// Backward is one pass over (inp, dout): each row writes its dinp and adds its dweight/dbias
// contribution (in the same loop as its row sums) into a fixed row block (cpu::reduce_rows), so the
// parameter gradients are bitwise the same for any thread count.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/layernorm.h"

namespace stretch::ops {
namespace {

void check_dims(const LayerNormDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.c > 0, "layernorm dims n=" << d.n << " c=" << d.c);
}

// One row's dinp (+=, or = when overwrite); xhat recomputed from the saved mean and rstd. With
// kAcc, the row's dweight/dbias contributions (acc [2C]: dy·xhat, then dy) are added in its first
// loop, the same products in the same row order as a separate pass: one read of the row.
template <bool kAcc>
inline void row_backward(float* __restrict dx, float* __restrict acc, const float* __restrict x,
                         const float* __restrict dy, const float* __restrict w, float m, float r, int64_t C,
                         bool overwrite) {
  float g_sum = 0.f, gx_sum = 0.f;
#pragma omp simd reduction(+ : g_sum, gx_sum)
  for (int64_t c = 0; c < C; ++c) {
    const float xhat = (x[c] - m) * r;
    const float g = (w ? w[c] : 1.f) * dy[c];
    g_sum += g;
    gx_sum += g * xhat;
    if constexpr (kAcc) {
      acc[c] += dy[c] * xhat;
      acc[C + c] += dy[c];
    }
  }
  const float g_mean = g_sum / static_cast<float>(C), gx_mean = gx_sum / static_cast<float>(C);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const float xhat = (x[c] - m) * r;
    const float g = (w ? w[c] : 1.f) * dy[c];
    const float v = r * (g - g_mean - xhat * gx_mean);
    dx[c] = overwrite ? v : dx[c] + v;
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, const LayerNormDims& d) {
  check_dims(d);
  const int64_t C = d.c;
  const float inv_c = 1.f / static_cast<float>(C);
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
  for (int64_t n = 0; n < d.n; ++n) {
    const float* __restrict x = inp + n * C;
    float* __restrict y = out + n * C;
    // One pass for both moments, shifted by the row's first element so a large common offset does
    // not cancel: var = E[(x−k)²] − E[x−k]², with k = x[0] within a few std of the mean.
    const float k = x[0];
    float s = 0.f, ss = 0.f;
#pragma omp simd reduction(+ : s, ss)
    for (int64_t c = 0; c < C; ++c) {
      const float t = x[c] - k;
      s += t;
      ss += t * t;
    }
    const float ms = s * inv_c;
    const float m = k + ms;
    const float v = std::max(ss * inv_c - ms * ms, 0.f);
    const float r = 1.f / std::sqrt(v + d.eps);
    if (weight && bias) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) * r * weight[c] + bias[c];
    } else {
      for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) * r * (weight ? weight[c] : 1.f) + (bias ? bias[c] : 0.f);
    }
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = r;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const LayerNormDims& d,
                        GradInit dinp_init) {
  check_dims(d);
  const int64_t C = d.c;
  const bool overwrite = dinp_init == GradInit::Overwrite;
  if (!dweight && !dbias) {
    if (!dinp) return;
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
    for (int64_t n = 0; n < d.n; ++n)
      row_backward<false>(dinp + n * C, nullptr, inp + n * C, dout + n * C, weight, mean[n], rstd[n], C,
                          overwrite);
    return;
  }
  // acc [2C]: dweight contributions then dbias contributions.
  cpu::Scratch both(2 * C);
  float* out2 = both.data();
  std::fill(out2, out2 + 2 * C, 0.f);
  cpu::reduce_rows(out2, d.n, 2 * C, [&](int64_t n, float* __restrict acc) {
    const float* __restrict x = inp + n * C;
    const float* __restrict dy = dout + n * C;
    const float m = mean[n], r = rstd[n];
    if (dinp) {
      row_backward<true>(dinp + n * C, acc, x, dy, weight, m, r, C, overwrite);
      return;
    }
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      acc[c] += dy[c] * ((x[c] - m) * r);
      acc[C + c] += dy[c];
    }
  });
  if (dweight)
    for (int64_t c = 0; c < C; ++c) dweight[c] += out2[c];
  if (dbias)
    for (int64_t c = 0; c < C; ++c) dbias[c] += out2[C + c];
}

}  // namespace stretch::ops
