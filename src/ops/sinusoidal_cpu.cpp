// ops/sinusoidal_cpu.cpp — the position table, fast path: frequencies computed once per call,
// OpenMP over rows; same float steps as the reference, so the values are bitwise identical.
#include <cmath>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/sinusoidal.h"

namespace stretch::ops {

void sinusoidal_forward(float* out, const int32_t* positions, const SinusoidalDims& d) {
  STRETCH_CHECK(d.c >= 4, "sinusoidal positions need C >= 4, got C=" << d.c);
  STRETCH_CHECK(d.n >= 0, "sinusoidal n=" << d.n);
  const int64_t half = d.c / 2, C = d.c;
  const float step = static_cast<float>(-std::log(10000.0) / static_cast<double>(half - 1));
  cpu::Scratch freq_buf(half);
  float* freq = freq_buf.data();
  for (int64_t k = 0; k < half; ++k)
    freq[k] = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(k) * step)));
#pragma omp parallel for schedule(static) if (d.n * C > 4096)
  for (int64_t n = 0; n < d.n; ++n) {
    float* row = out + n * C;
    const int32_t pos = positions[n];
    if (pos == d.padding_idx) {
      for (int64_t c = 0; c < C; ++c) row[c] = 0.f;
      continue;
    }
    for (int64_t k = 0; k < half; ++k) {
      const double arg = static_cast<float>(pos) * freq[k];
      row[k] = static_cast<float>(std::sin(arg));
      row[half + k] = static_cast<float>(std::cos(arg));
    }
    if (C % 2) row[C - 1] = 0.f;
  }
}

void make_positions(int32_t* positions, const int32_t* tokens, int64_t b, int64_t t, int32_t padding_idx) {
  for (int64_t i = 0; i < b; ++i) {
    int32_t seen = 0;
    for (int64_t j = 0; j < t; ++j) {
      const int32_t tok = tokens[i * t + j];
      if (tok == padding_idx) {
        positions[i * t + j] = padding_idx;
      } else {
        ++seen;
        positions[i * t + j] = padding_idx + seen;
      }
    }
  }
}

}  // namespace stretch::ops
