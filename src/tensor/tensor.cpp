#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>

#include "tensor/pool.h"

namespace stretch {

Storage::Storage(size_t bytes) : data_(pool_alloc(bytes)), bytes_(bytes) {}
Storage::~Storage() { pool_free(data_, bytes_); }

Tensor Tensor::empty(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes());
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  t.zero_();
  return t;
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t = empty(std::move(shape), DType::F32);
  t.fill_(value);
  return t;
}

Tensor Tensor::view(Shape shape) const {
  STRETCH_CHECK(shape.numel() == numel(), "view " << shape.str() << " of " << shape_.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t start, int64_t count) const {
  STRETCH_CHECK(rank() >= 1 && start >= 0 && count >= 0 && start + count <= shape_[0],
                "slice_rows [" << start << ", " << start + count << ") of " << shape_.str());
  std::vector<int64_t> dims = shape_.dims();
  const size_t row_bytes = dims[0] > 0 ? nbytes() / static_cast<size_t>(dims[0]) : 0;
  dims[0] = count;
  Tensor t = *this;
  t.shape_ = Shape(dims);
  t.offset_bytes_ += static_cast<size_t>(start) * row_bytes;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

void Tensor::zero_() {
  if (nbytes()) std::memset(raw(), 0, nbytes());
}

void Tensor::fill_(float v) {
  float* p = f32();
  std::fill(p, p + numel(), v);
}

void Tensor::copy_from(const Tensor& src) {
  STRETCH_CHECK(src.numel() == numel() && src.dtype() == dtype(),
                "copy_from " << src.shape().str() << " into " << shape_.str());
  if (nbytes()) std::memcpy(raw(), src.raw(), nbytes());
}

}  // namespace stretch
