// data/batch.cpp — see batch.h.
#include "data/batch.h"

#include <algorithm>

namespace stretch::data {

void Batch::reset(int64_t rows, int64_t width, int32_t pad) {
  src = Tensor::empty(Shape{rows, width}, DType::I32);
  tgt = Tensor::empty(Shape{rows, width}, DType::I32);
  std::fill(src.i32(), src.i32() + rows * width, pad);
  std::fill(tgt.i32(), tgt.i32() + rows * width, pad);
  const auto n = static_cast<size_t>(rows);
  ids.assign(n, 0);
  offsets.assign(n, 0);
  lengths.assign(n, 0);
  starts.assign(n, 0);
  ntokens = 0;
}

void prepend_bos(Batch& b, int32_t bos) {
  if (b.empty()) return;
  const int64_t B = b.rows(), W = b.width();
  Tensor src = Tensor::empty(Shape{B, W + 1}, DType::I32), tgt = Tensor::empty(Shape{B, W + 1}, DType::I32);  // [B, T + 1]
  for (int64_t r = 0; r < B; ++r) {
    int32_t* s = src.i32() + r * (W + 1);
    int32_t* t = tgt.i32() + r * (W + 1);
    s[0] = t[0] = bos;
    std::copy_n(b.src.i32() + r * W, W, s + 1);
    std::copy_n(b.tgt.i32() + r * W, W, t + 1);
  }
  b.src = src;
  b.tgt = tgt;
  for (int32_t& len : b.lengths) ++len;
  b.ntokens += B;
}

}  // namespace stretch::data
