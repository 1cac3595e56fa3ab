// ops/dropout_cpu.cpp — dropout fast path: OpenMP over chunks of kChunk elements; each chunk
// gets its scale factors (keep / (1 − p) or 0) from the SIMD Philox (dropout_factors) into a
// stack buffer, then one vectorised multiply. The mask depends only on (seed, stream, element
// index), so the result is identical for any thread count and to the reference. p = 0 is a copy.
#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/dropout.h"

namespace stretch::ops {
namespace {

constexpr int64_t kChunk = 1024;

enum class Store : uint8_t { Write, Accumulate, AddResidual };

// out = f(inp) · z, with Store::Accumulate out += …, Store::AddResidual out = res + ….
template <Store kStore>
void apply(float* out, const float* res, const float* inp, int64_t n, const DropoutParams& p) {
  STRETCH_CHECK(p.p >= 0.f && p.p < 1.f, "dropout p=" << p.p << " must be in [0, 1)");
  STRETCH_CHECK(n >= 0, "dropout n=" << n);
  if (p.p == 0.f) {
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i)
      out[i] = kStore == Store::Accumulate ? out[i] + inp[i] : kStore == Store::AddResidual ? res[i] + inp[i] : inp[i];
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > cpu::kParallelThreshold / 2)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) float z[kChunk];
    const int64_t i0 = c * kChunk, m = std::min(kChunk, n - i0);
    dropout_factors(p, i0, m, z);
    float* o = out + i0;
    const float* x = inp + i0;
    if constexpr (kStore == Store::Write) {
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) o[i] = x[i] * z[i];
    } else if constexpr (kStore == Store::Accumulate) {
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) o[i] += x[i] * z[i];
    } else {
      const float* r = res + i0;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) o[i] = r[i] + x[i] * z[i];
    }
  }
}

}  // namespace

void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p) {
  apply<Store::Write>(out, nullptr, inp, n, p);
}
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p, GradInit init) {
  if (init == GradInit::Overwrite) apply<Store::Write>(dinp, nullptr, dout, n, p);
  else apply<Store::Accumulate>(dinp, nullptr, dout, n, p);
}
void dropout_add_forward(float* out, const float* res, const float* inp, int64_t n, const DropoutParams& p) {
  apply<Store::AddResidual>(out, res, inp, n, p);
}

}  // namespace stretch::ops
