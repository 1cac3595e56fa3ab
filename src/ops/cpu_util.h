// ops/cpu_util.h — helpers shared by the fast CPU kernels (internal, not part of the op API).
// Contract:
//  - Scratch: a float buffer from the tensor pool (tensor/pool.h), so a training step of repeated
//    shapes makes no system allocation after its first round, even inside ops (movable, so a
//    per-call setup struct can own one).
//  - reduce_rows: a column reduction over N rows whose result is bitwise the same for any thread
//    count: rows are cut into fixed blocks of kRowBlock, each block is summed in row order, then
//    blocks are summed in block order. Results ACCUMULATE (+=) into out.
//  - parallel_threshold: below this many elements a pointwise op runs on one thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "tensor/pool.h"

namespace stretch::ops::cpu {

constexpr int64_t kParallelThreshold = 1 << 15;
constexpr int64_t kRowBlock = 32;

class Scratch {
 public:
  Scratch() = default;  // empty: data() is null
  explicit Scratch(int64_t n) : bytes_(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float)) {
    data_ = static_cast<float*>(pool_alloc(bytes_));
  }
  ~Scratch() {
    if (data_ != nullptr) pool_free(data_, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept : bytes_(o.bytes_), data_(o.data_) { o.data_ = nullptr; }
  Scratch& operator=(Scratch&& o) noexcept {
    std::swap(bytes_, o.bytes_);
    std::swap(data_, o.data_);
    return *this;
  }
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  size_t bytes_ = 0;
  float* data_ = nullptr;
};

// out [W] += Σ_rows row_fn's contributions. row_fn(row, acc [W]) adds row `row` into acc.
template <class RowFn>
void reduce_rows(float* out, int64_t n, int64_t width, RowFn row_fn) {
  if (n <= 0 || width <= 0) return;
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  Scratch partial(blocks * width);  // [blocks, W]
  float* p = partial.data();
  constexpr int64_t kCols = 64;
  const int64_t col_blocks = (width + kCols - 1) / kCols;
  // One parallel region (one fork/join): partial sums per row block, a barrier, then the blocks
  // summed in order, parallel over columns.
#pragma omp parallel if (n * width > kParallelThreshold)
  {
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      float* acc = p + blk * width;
      std::memset(acc, 0, static_cast<size_t>(width) * sizeof(float));
      const int64_t r1 = std::min(n, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < r1; ++r) row_fn(r, acc);
    }
#pragma omp for schedule(static)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t c0 = cb * kCols, c1 = std::min(width, c0 + kCols);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const float* acc = p + blk * width;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) out[c] += acc[c];
      }
    }
  }
}

}  // namespace stretch::ops::cpu
