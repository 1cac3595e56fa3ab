// nn/chunked_nll.cpp — see chunked_nll.h.
#include "nn/chunked_nll.h"

#include <algorithm>
#include <vector>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "nn/output_head.h"
#include "ops/cross_entropy.h"

namespace stretch::nn {
using namespace stretch::autograd;
namespace {
constexpr int32_t kNoIgnore = -1000000;  // an ignore index no target equals
static_assert(kScoreBlockColumns % ops::kLseColumnAlign == 0, "score blocks start at the online softmax's chunks");

// One chunk's NLL from logits projected a column block at a time (block_logits(h, first, count) →
// [m, count]), each block scored while it is in cache: the rows' running log-sum-exp
// (ops::lse_accumulate) and their target logits. Bitwise cross_entropy_forward's NLL on [m, V].
void nll_by_column_blocks(const Tensor& h, const int32_t* tgt, float* nll, int64_t V, const BlockLogits& block_logits) {
  const int64_t m = h.dim(0);
  std::vector<ops::RunningLse> lse(static_cast<size_t>(m));
  std::vector<double> target_logit(static_cast<size_t>(m), 0.0);
  for (int64_t c0 = 0; c0 < V; c0 += kScoreBlockColumns) {
    const int64_t w = std::min(kScoreBlockColumns, V - c0);
    const Tensor lg = block_logits(h, c0, w);  // [m, w]
    ops::lse_accumulate(lse.data(), lg.f32(), m, w, w, c0);
    for (int64_t i = 0; i < m; ++i)
      if (tgt[i] >= c0 && tgt[i] < c0 + w) target_logit[i] = static_cast<double>(lg.f32()[i * w + tgt[i] - c0]);
  }
  for (int64_t i = 0; i < m; ++i) nll[i] = static_cast<float>(lse[i].value() - target_logit[i]);
}

}  // namespace

void chunked_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                        float* nll, int64_t chunk_rows, int64_t V, const std::function<Tensor(const Tensor&)>& logits,
                        const BlockLogits& block_logits) {
  STRETCH_CHECK(rows.size() == targets.size(), "target_nll: " << rows.size() << " rows, " << targets.size() << " targets");
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t C = hidden.dim(hidden.rank() - 1);
  // Rows per chunk: as many as kScoreChunkBytes of the logits in flight allow ([m, V], or one
  // [m, kScoreBlockColumns] block at a time), unless chunk_rows is given.
  const bool by_blocks = block_logits && V > kScoreBlockColumns;
  const int64_t width = by_blocks ? kScoreBlockColumns : V;
  const int64_t chunk =
      chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, kScoreChunkBytes / (width * static_cast<int64_t>(sizeof(float))));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    Tensor h = Tensor::empty({m, C});  // [m, C]
    Tensor tgt = Tensor::empty({m}, DType::I32);
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(hidden.f32() + rows[r0 + i] * C, C, h.f32() + i * C);
      tgt.i32()[i] = targets[r0 + i];
    }
    const ops::CrossEntropyDims d{.n = m, .v = V, .ignore_index = kNoIgnore};
    if (by_blocks) {
      ops::check_cross_entropy_targets(tgt.i32(), d);
      nll_by_column_blocks(h, tgt.i32(), nll + r0, V, block_logits);
      continue;
    }
    Tensor lg = logits(h);  // [m, V]
    Tensor lse = Tensor::empty({m});
    ops::cross_entropy_forward(nll + r0, lse.f32(), lg.f32(), tgt.i32(), d);
  }
}

void banded_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                       float* nll, int64_t chunk_rows, const VocabBands& bands, int64_t vocab_size,
                       const std::function<autograd::Var(const autograd::Var&)>& head_logits,
                       const std::function<autograd::Var(int64_t band, const autograd::Var&)>& band_logits) {
  STRETCH_CHECK(rows.size() == targets.size(), "target_nll: " << rows.size() << " rows, " << targets.size() << " targets");
  NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(rows.size()), C = hidden.dim(hidden.rank() - 1);
  const int64_t c0 = bands.size(0), k = bands.count();
  // Rows per chunk of logits `width` wide: chunk_rows, or as many as kScoreChunkBytes allow. The
  // head is chunked by its own width, each band's rows by the band's (a chunk of rows sized for
  // the widest band would make the head's GEMMs needlessly short).
  auto rows_for = [&](int64_t width) {
    return chunk_rows > 0 ? chunk_rows
                          : std::max<int64_t>(1, kScoreChunkBytes / (width * static_cast<int64_t>(sizeof(float))));
  };
  const int64_t chunk = rows_for(c0 + k - 1);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t m = std::min(chunk, n - r0);
    Tensor h = Tensor::empty({m, C});  // [m, C]
    Tensor head_target = Tensor::empty({m}, DType::I32);
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(hidden.f32() + rows[r0 + i] * C, C, h.f32() + i * C);
      const int32_t w = targets[r0 + i];
      STRETCH_CHECK(w >= 0 && w < vocab_size, "target_nll: target " << w << " outside the vocabulary");
      head_target.i32()[i] = w < c0 ? w : static_cast<int32_t>(c0 + bands.band_of(w) - 1);
    }
    const Var hv(h);
    {
      Tensor lg = head_logits(hv).value();  // [m, c_0 + k − 1]
      Tensor lse = Tensor::empty({m});
      ops::cross_entropy_forward(nll + r0, lse.f32(), lg.f32(), head_target.i32(),
                                 {.n = m, .v = lg.dim(1), .ignore_index = kNoIgnore});
    }
    const BandRoute route_m = route(bands, targets.data() + r0, m);
    for (int64_t b = 1; b < k; ++b) {
      const Tensor& br = route_m.rows[static_cast<size_t>(b)];
      const Tensor& local = route_m.local[static_cast<size_t>(b)];
      const int64_t mb = br.numel(), sub = rows_for(bands.size(b));
      for (int64_t s0 = 0; s0 < mb; s0 += sub) {
        const int64_t ms = std::min(sub, mb - s0);
        Tensor sr = br.slice_rows(s0, ms), sl = local.slice_rows(s0, ms);
        Tensor lg = band_logits(b, gather_rows(hv, sr)).value();  // [ms, size_b]
        Tensor lse = Tensor::empty({ms}), nb = Tensor::empty({ms});
        ops::cross_entropy_forward(nb.f32(), lse.f32(), lg.f32(), sl.i32(),
                                   {.n = ms, .v = lg.dim(1), .ignore_index = kNoIgnore});
        for (int64_t j = 0; j < ms; ++j) nll[r0 + sr.i64()[j]] += nb.f32()[j];
      }
    }
  }
}

}  // namespace stretch::nn
