// nn/chunked_nll.cpp — see chunked_nll.h.
#include "nn/chunked_nll.h"

#include <algorithm>

#include "core/error.h"
#include "nn/output_head.h"
#include "ops/cross_entropy.h"

namespace stretch::nn {

void chunked_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                        float* nll, int64_t chunk_rows, int64_t V, const std::function<Tensor(const Tensor&)>& logits) {
  STRETCH_CHECK(rows.size() == targets.size(), "target_nll: " << rows.size() << " rows, " << targets.size() << " targets");
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t C = hidden.dim(hidden.rank() - 1);
  const int64_t chunk = chunk_rows > 0 ? chunk_rows
                                       : std::max<int64_t>(1, kScoreChunkBytes / (V * static_cast<int64_t>(sizeof(float))));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    Tensor h = Tensor::empty({m, C});  // [m, C]
    Tensor tgt = Tensor::empty({m}, DType::I32);
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(hidden.f32() + rows[r0 + i] * C, C, h.f32() + i * C);
      tgt.i32()[i] = targets[r0 + i];
    }
    Tensor lg = logits(h);  // [m, V]
    Tensor lse = Tensor::empty({m});
    ops::cross_entropy_forward(nll + r0, lse.f32(), lg.f32(), tgt.i32(), {.n = m, .v = V, .ignore_index = -1000000});
  }
}

}  // namespace stretch::nn
