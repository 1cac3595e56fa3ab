// ops/column_scatter.h — the deterministic scatter-add shared by embedding_backward and
// row_gather_backward: dst[row(n)] += scale · src[n] for n = 0..N-1 in order, with the C columns
// split into 16-wide blocks across threads, so every destination element is summed by one thread
// in the same order whatever the thread count (bitwise reproducible).
//   row(n) -> the destination row of source row n, or -1 to skip it (e.g. the padding index).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "ops/cpu_util.h"

namespace stretch::ops {

template <class RowOf>
void column_blocked_scatter_add(float* dst, const float* src, int64_t n_rows, int64_t C, float scale, RowOf row_of) {
  if (n_rows == 0 || C == 0) return;
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  const int want = n_rows * C > cpu::kParallelThreshold ? omp_get_max_threads() : 1;
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(want, blocks));
#pragma omp parallel num_threads(static_cast<int>(nt))
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t per = (blocks + team - 1) / team;
    const int64_t c0 = std::min(C, t * per * kBlock), c1 = std::min(C, (t + 1) * per * kBlock);
    if (c0 < c1) {
      for (int64_t n = 0; n < n_rows; ++n) {
        const int64_t r = row_of(n);
        if (r < 0) continue;
        float* __restrict d = dst + r * C;
        const float* __restrict s = src + n * C;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) d[c] += scale * s[c];
      }
    }
  }
}

}  // namespace stretch::ops
