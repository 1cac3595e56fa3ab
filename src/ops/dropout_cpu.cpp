// ops/dropout_cpu.cpp — dropout fast path: OpenMP over 4-element Philox blocks (dropout_keep4,
// one Philox call per 4 elements instead of per element). The mask depends only on (seed, stream,
// element index), so the result is identical for any thread count. p = 0 is a plain copy.
#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/dropout.h"

namespace stretch::ops {
namespace {

template <bool kAccumulate>
void apply(float* out, const float* inp, int64_t n, const DropoutParams& p) {
  STRETCH_CHECK(p.p >= 0.f && p.p < 1.f, "dropout p=" << p.p << " must be in [0, 1)");
  STRETCH_CHECK(n >= 0, "dropout n=" << n);
  if (p.p == 0.f) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) out[i] = kAccumulate ? out[i] + inp[i] : inp[i];
    return;
  }
  const float scale = 1.f / (1.f - p.p);
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > cpu::kParallelThreshold / 8)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const uint32_t bits = dropout_keep4(p, blk);
    const int64_t i0 = blk * 4, i1 = i0 + 4 < n ? i0 + 4 : n;
    for (int64_t i = i0; i < i1; ++i) {
      const float v = (bits >> (i - i0)) & 1u ? inp[i] * scale : 0.f;
      out[i] = kAccumulate ? out[i] + v : v;
    }
  }
}

}  // namespace

void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p) { apply<false>(out, inp, n, p); }
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p) {
  apply<true>(dinp, dout, n, p);
}

}  // namespace stretch::ops
