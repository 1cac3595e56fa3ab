// tensor/tensor.h — Tensor: a contiguous row-major buffer with a Shape (PyTorch dimension
// order) and a dtype. Copies share the buffer (like torch.Tensor); clone() copies data.
// Buffers come from the caching pool (tensor/pool.h). Device is CPU today; the tag exists so
// a CUDA backend can be added without changing signatures.
#pragma once
#include <memory>

#include "core/error.h"
#include "core/shape.h"
#include "tensor/dtype.h"

namespace stretch {

enum class Device : uint8_t { Cpu, Cuda };

class Storage {
 public:
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(Shape shape, DType dtype = DType::F32);
  static Tensor zeros(Shape shape, DType dtype = DType::F32);
  static Tensor full(Shape shape, float value);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return Device::Cpu; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  float* f32() { check_dtype(DType::F32); return static_cast<float*>(raw()); }
  const float* f32() const { check_dtype(DType::F32); return static_cast<const float*>(raw()); }
  int32_t* i32() { check_dtype(DType::I32); return static_cast<int32_t*>(raw()); }
  const int32_t* i32() const { check_dtype(DType::I32); return static_cast<const int32_t*>(raw()); }
  bf16* bf() { check_dtype(DType::BF16); return static_cast<bf16*>(raw()); }
  const bf16* bf() const { check_dtype(DType::BF16); return static_cast<const bf16*>(raw()); }
  int64_t* i64() { check_dtype(DType::I64); return static_cast<int64_t*>(raw()); }
  const int64_t* i64() const { check_dtype(DType::I64); return static_cast<const int64_t*>(raw()); }
  uint8_t* u8() { check_dtype(DType::U8); return static_cast<uint8_t*>(raw()); }
  const uint8_t* u8() const { check_dtype(DType::U8); return static_cast<const uint8_t*>(raw()); }
  // The nbytes() bytes of the buffer, whatever the dtype (serialization, memcpy).
  void* bytes() { return raw(); }
  const void* bytes() const { return raw(); }

  // Same buffer, new shape with the same numel (a view; no copy).
  Tensor view(Shape shape) const;
  // Rows [start, start + count) along dim 0: a contiguous view sharing the buffer (no copy).
  Tensor slice_rows(int64_t start, int64_t count) const;
  Tensor clone() const;
  void zero_();
  void fill_(float v);
  void copy_from(const Tensor& src);  // same numel and dtype

 private:
  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  void check_dtype(DType t) const {
    STRETCH_CHECK(dtype_ == t, "tensor is " << dtype_name(dtype_) << ", asked for " << dtype_name(t));
  }
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

}  // namespace stretch
