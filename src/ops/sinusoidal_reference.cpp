// ops/sinusoidal_reference.cpp — naive oracle: fairseq's get_embedding step by step, per element.
#include <cmath>

#include "core/error.h"
#include "ops/sinusoidal.h"

namespace stretch::ops::ref {

void sinusoidal_forward(float* out, const int32_t* positions, const SinusoidalDims& d) {
  STRETCH_CHECK(d.c >= 4, "sinusoidal positions need C >= 4, got C=" << d.c);
  const int64_t half = d.c / 2;
  // fairseq: emb = log(10000) / (half − 1) in Python double, multiplied into a float tensor.
  const float step = static_cast<float>(-std::log(10000.0) / static_cast<double>(half - 1));
  for (int64_t n = 0; n < d.n; ++n) {
    const int32_t pos = positions[n];
    for (int64_t c = 0; c < d.c; ++c) {
      float v = 0.f;
      if (pos != d.padding_idx && c < 2 * half) {
        const int64_t k = c < half ? c : c - half;
        const float freq = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(k) * step)));
        const float arg = static_cast<float>(pos) * freq;
        v = static_cast<float>(c < half ? std::sin(static_cast<double>(arg)) : std::cos(static_cast<double>(arg)));
      }
      out[n * d.c + c] = v;
    }
  }
}

}  // namespace stretch::ops::ref
