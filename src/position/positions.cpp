#include "position/positions.h"

#include "ops/sinusoidal.h"

namespace stretch::position {

Tensor make_positions(const Tensor& src, int32_t padding_idx, int64_t pos_offset) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor pos = Tensor::empty({B, T}, DType::I32);
  const int32_t* s = src.i32();
  int32_t* p = pos.i32();
  for (int64_t b = 0; b < B; ++b) {
    int32_t count = static_cast<int32_t>(pos_offset);
    for (int64_t t = 0; t < T; ++t) {
      bool pad = s[b * T + t] == padding_idx;
      if (!pad) ++count;
      p[b * T + t] = pad ? padding_idx : padding_idx + count;
    }
  }
  return pos;
}

Tensor key_padding_mask(const Tensor& src, int32_t padding_idx) {
  const int64_t n = src.numel();
  const int32_t* s = src.i32();
  bool any = false;
  for (int64_t i = 0; i < n && !any; ++i) any = s[i] == padding_idx;
  if (!any) return Tensor();
  Tensor m = Tensor::empty(src.shape(), DType::I32);
  for (int64_t i = 0; i < n; ++i) m.i32()[i] = s[i] == padding_idx ? 1 : 0;
  return m;
}

Tensor sinusoidal_for_tokens(const Tensor& src, int64_t dim, int32_t padding_idx, int64_t pos_offset) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor pos = make_positions(src, padding_idx, pos_offset);
  Tensor out = Tensor::empty({B, T, dim});
  ops::sinusoidal_rows(out.f32(), pos.i32(), B * T, dim, padding_idx);
  return out;
}

}  // namespace stretch::position
