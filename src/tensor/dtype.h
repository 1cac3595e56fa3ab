// tensor/dtype.h — element types: fp32 (everything today), int32 (token ids), bf16 (storage
// for mixed precision: round-to-nearest-even from fp32, exact widening back), int64 and uint8
// (checkpoint contents: counters, RNG state, raw bytes; see tensor/safetensors.h).
// New values are appended so existing enum values never change.
#pragma once
#include <cstdint>
#include <cstring>

namespace stretch {

enum class DType : uint8_t { F32, I32, BF16, I64, U8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

struct bf16 {
  uint16_t bits;
};

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}
inline float bf16_to_float(bf16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace stretch
