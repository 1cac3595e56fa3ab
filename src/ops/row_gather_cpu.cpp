// ops/row_gather_cpu.cpp — row gather fast path.
// Forward: OpenMP over picked rows, one contiguous row copy (or add) each.
// Backward: deterministic for any thread count, as embedding_backward: each thread owns a range
// of columns (whole 16-float blocks) and walks all indices in order, so no two threads touch the
// same element and every element sees its additions in index order, exactly as the reference.
#include <omp.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/row_gather.h"

namespace stretch::ops {
namespace {

void check_rows(const int64_t* rows, const RowGatherDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.rows >= 0 && d.c >= 0, "row_gather dims n=" << d.n << " rows=" << d.rows << " c=" << d.c);
  for (int64_t i = 0; i < d.n; ++i)
    if (rows[i] < 0 || rows[i] >= d.rows)
      throw Error(ErrorKind::Internal, "row_gather: index " + std::to_string(rows[i]) + " at offset " +
                                           std::to_string(i) + " is outside the " + std::to_string(d.rows) + " rows");
}

}  // namespace

void row_gather_forward(float* out, const float* x, const int64_t* rows, const RowGatherDims& d, GradInit init) {
  check_rows(rows, d);
  const int64_t C = d.c;
  const bool acc = init == GradInit::Accumulate;
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
  for (int64_t i = 0; i < d.n; ++i) {
    const float* __restrict src = x + rows[i] * C;
    float* __restrict dst = out + i * C;
    if (acc) {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
    } else {
      std::copy_n(src, C, dst);
    }
  }
}

void row_gather_backward(float* dx, const float* dout, const int64_t* rows, const RowGatherDims& d) {
  check_rows(rows, d);
  const int64_t C = d.c;
  if (d.n == 0 || C == 0) return;
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  const int want = d.n * C > cpu::kParallelThreshold ? omp_get_max_threads() : 1;
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(want, blocks));
#pragma omp parallel num_threads(static_cast<int>(nt))
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t per = (blocks + team - 1) / team;
    const int64_t c0 = std::min(C, t * per * kBlock), c1 = std::min(C, (t + 1) * per * kBlock);
    if (c0 < c1) {
      for (int64_t i = 0; i < d.n; ++i) {
        float* __restrict dst = dx + rows[i] * C;
        const float* __restrict src = dout + i * C;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
      }
    }
  }
}

}  // namespace stretch::ops
