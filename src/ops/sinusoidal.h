// ops/sinusoidal.h — fairseq's sinusoidal position table (SinusoidalPositionalEmbedding;
// REFERENCE.md §2.7), for the non-ALiBi baselines. No gradient.
//   half = C/2, freq_k = exp(−k·ln(10000)/(half − 1)), k = 0 .. half−1
//   row(pos) = [sin(pos·freq) ‖ cos(pos·freq)] (halves concatenated, not interleaved),
//   plus a zero last column when C is odd; row(padding_idx) = 0.
// Positions are fairseq's: the first real token of a row is padding_idx + 1 (= 2), pad tokens
// get padding_idx (make_positions). Arithmetic follows fairseq's float32 steps (freq and
// pos·freq rounded to float, sin/cos of that float argument correctly rounded), so values match
// fairseq's table to ~1 ulp. C must be ≥ 4 (fairseq divides by half − 1).
#pragma once
#include <cstdint>

namespace stretch::ops {

struct SinusoidalDims {
  int64_t n = 0;            // rows to fill: B·T (or T)
  int64_t c = 0;            // embedding dim C (≥ 4)
  int32_t padding_idx = 1;  // fairseq's pad index: this position is a zero row
};

// out [N, C] = table[positions [N]]  (positions ≥ 0)
void sinusoidal_forward(float* out, const int32_t* positions, const SinusoidalDims& d);

// positions [B, T] from tokens [B, T] as fairseq's make_positions: a pad token gets padding_idx,
// any other token padding_idx + (number of non-pad tokens up to and including it in its row).
void make_positions(int32_t* positions, const int32_t* tokens, int64_t b, int64_t t, int32_t padding_idx);

namespace ref {
void sinusoidal_forward(float* out, const int32_t* positions, const SinusoidalDims& d);
}  // namespace ref

}  // namespace stretch::ops
