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

#include "ops/column_scatter.h"

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
  // dx[rows[i]] += dout[i]: a plain += (scale 1 is exact).
  column_blocked_scatter_add(dx, dout, d.n, d.c, 1.0f, [rows](int64_t i) { return rows[i]; });
}

}  // namespace stretch::ops
