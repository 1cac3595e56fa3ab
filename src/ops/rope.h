// ops/rope.h — rotary position embedding (RoPE) on q or k, rotate-half convention (GPT-NeoX,
// LLaMA): channel i is paired with channel i + D/2, and the pair at time t is rotated by
//   θ(t, i) = (pos0 + t) · base^(−2i/D),   i = 0 .. D/2 − 1
//   y_i       = x_i·cos θ − x_{i+D/2}·sin θ
//   y_{i+D/2} = x_{i+D/2}·cos θ + x_i·sin θ
// Angles are computed in double and rounded once, so long positions (T = 16k and beyond) keep
// full float accuracy. Apply it to q and to k separately (two calls, same dims).
// Backward is the inverse rotation of dout, ACCUMULATED (+=) into dinp. D must be even.
#pragma once
#include <cstdint>

namespace stretch::ops {

struct RopeDims {
  int64_t b = 0, h = 0, t = 0, d = 0;  // x is [B, H, T, D]
  int64_t pos0 = 0;                    // position of time step 0 (> 0 for cached decoding)
  float base = 10000.f;
};

// out [B, H, T, D] = rotate(inp [B, H, T, D]); out may alias inp.
void rope_forward(float* out, const float* inp, const RopeDims& d);
// dinp [B, H, T, D] += rotate⁻¹(dout [B, H, T, D])
void rope_backward(float* dinp, const float* dout, const RopeDims& d);

namespace ref {
void rope_forward(float* out, const float* inp, const RopeDims& d);
void rope_backward(float* dinp, const float* dout, const RopeDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void rope_forward(double* out, const double* inp, const RopeDims& d);
void rope_backward(double* dinp, const double* dout, const RopeDims& d);
}  // namespace ref

}  // namespace stretch::ops
