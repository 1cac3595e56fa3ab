// ops/embedding_cpu.cpp — embedding fast path.
// Forward: OpenMP over ids, one scaled row copy each.
// Backward: deterministic for any thread count. Each thread owns a contiguous range of columns
// (whole 16-float blocks) and walks all ids in order, adding its slice of dout[n] into
// dtable[ids[n]]; no two threads ever touch the same element, and every element sees its
// additions in id order, exactly as the reference does.
#include <omp.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/embedding.h"

#include "ops/column_scatter.h"

namespace stretch::ops {
namespace {

void check_ids(const int32_t* ids, const EmbeddingDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.v >= 0 && d.c >= 0, "embedding dims n=" << d.n << " v=" << d.v << " c=" << d.c);
  int64_t bad = -1;
  for (int64_t n = 0; n < d.n; ++n) {
    if (ids[n] < 0 || ids[n] >= d.v) {
      bad = n;
      break;
    }
  }
  if (bad >= 0) {
    throw Error(ErrorKind::Input,
                "embedding: token id " + std::to_string(ids[bad]) + " at offset " + std::to_string(bad) +
                    " is outside the table of " + std::to_string(d.v) + " rows",
                "the data was binarized with a larger dictionary than the model's; re-run preprocess or "
                "point --data at the matching dict.txt");
  }
}

}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* table, float scale, const EmbeddingDims& d) {
  check_ids(ids, d);
  const int64_t C = d.c;
#pragma omp parallel for schedule(static) if (d.n * C > cpu::kParallelThreshold)
  for (int64_t n = 0; n < d.n; ++n) {
    const float* __restrict src = table + static_cast<int64_t>(ids[n]) * C;
    float* __restrict dst = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dst[c] = scale * src[c];
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, float scale, const EmbeddingDims& d) {
  check_ids(ids, d);
  // dtable[ids[n]] += scale · dout[n], the padding row skipped (no gradient, torch's rule).
  column_blocked_scatter_add(dtable, dout, d.n, d.c, scale, [ids, pad = d.padding_idx](int64_t n) {
    return ids[n] == pad ? int64_t{-1} : static_cast<int64_t>(ids[n]);
  });
}

}  // namespace stretch::ops
