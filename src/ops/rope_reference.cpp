// ops/rope_reference.cpp — naive oracle for RoPE: the angle recomputed in double per element.
#include <cmath>

#include "core/error.h"
#include "ops/rope.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void rotate(T* out, const T* inp, const RopeDims& d, double sign, bool accumulate) {
  STRETCH_CHECK(d.d % 2 == 0, "rope needs an even head dim, got D=" << d.d);
  const int64_t half = d.d / 2;
  for (int64_t bh = 0; bh < d.b * d.h; ++bh)
    for (int64_t t = 0; t < d.t; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double inv_freq = std::pow(static_cast<double>(d.base), -2.0 * static_cast<double>(i) / d.d);
        const double theta = static_cast<double>(d.pos0 + t) * inv_freq;
        const double c = std::cos(theta), s = sign * std::sin(theta);
        const int64_t row = (bh * d.t + t) * d.d;
        const double x0 = inp[row + i], x1 = inp[row + i + half];
        const double y0 = x0 * c - x1 * s, y1 = x1 * c + x0 * s;
        if (accumulate) {
          out[row + i] = static_cast<T>(out[row + i] + y0);
          out[row + i + half] = static_cast<T>(out[row + i + half] + y1);
        } else {
          out[row + i] = static_cast<T>(y0);
          out[row + i + half] = static_cast<T>(y1);
        }
      }
}

}  // namespace

void rope_forward(float* out, const float* inp, const RopeDims& d) { rotate(out, inp, d, 1.0, false); }
void rope_backward(float* dinp, const float* dout, const RopeDims& d) { rotate(dinp, dout, d, -1.0, true); }
void rope_forward(double* out, const double* inp, const RopeDims& d) { rotate(out, inp, d, 1.0, false); }
void rope_backward(double* dinp, const double* dout, const RopeDims& d) { rotate(dinp, dout, d, -1.0, true); }

}  // namespace stretch::ops::ref
