#include "position/positions.h"

#include "ops/sinusoidal.h"

namespace stretch::position {

Tensor make_positions(const Tensor& src, int32_t padding_idx, int64_t pos_offset) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor pos = Tensor::empty({B, T}, DType::I32);
  ops::make_positions(pos.i32(), src.i32(), B, T, padding_idx);
  if (pos_offset != 0) {  // continuing a cached prefix: token positions shift, pads stay padding_idx
    const int32_t* s = src.i32();
    for (int64_t i = 0; i < B * T; ++i)
      if (s[i] != padding_idx) pos.i32()[i] += static_cast<int32_t>(pos_offset);
  }
  return pos;
}

Tensor key_padding_mask(const Tensor& src, int32_t padding_idx) {
  const int64_t n = src.numel();
  const int32_t* s = src.i32();
  bool any = false;
  for (int64_t i = 0; i < n && !any; ++i) any = s[i] == padding_idx;
  if (!any) return Tensor();
  Tensor m = Tensor::empty(src.shape(), DType::U8);
  for (int64_t i = 0; i < n; ++i) m.u8()[i] = s[i] == padding_idx ? 1 : 0;
  return m;
}

Tensor sinusoidal_for_tokens(const Tensor& src, int64_t dim, int32_t padding_idx, int64_t pos_offset) {
  const int64_t B = src.dim(0), T = src.dim(1);
  Tensor pos = make_positions(src, padding_idx, pos_offset);
  Tensor out = Tensor::empty({B, T, dim});
  ops::sinusoidal_forward(out.f32(), pos.i32(), {.n = B * T, .c = dim, .padding_idx = padding_idx});
  return out;
}

}  // namespace stretch::position
