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

}  // namespace stretch::data
