// ops/channel_scale_reference.cpp — the naive oracle of channel_scale: element by element, the
// scale's gradient summed over rows then channels in order.
#include "ops/channel_scale.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void forward(T* y, const T* x, const T* w, const ChannelScaleDims& d) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) y[n * d.c + c] = x[n * d.c + c] * w[c / d.group];
}

template <class T>
void backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const ChannelScaleDims& d) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) {
      const int64_t i = n * d.c + c;
      if (dx) dx[i] += dy[i] * w[c / d.group];
      if (dw) dw[c / d.group] += dy[i] * x[i];
    }
}

}  // namespace

void channel_scale_forward(float* y, const float* x, const float* w, const ChannelScaleDims& d) { forward(y, x, w, d); }
void channel_scale_forward(double* y, const double* x, const double* w, const ChannelScaleDims& d) {
  forward(y, x, w, d);
}
void channel_scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                            const ChannelScaleDims& d) {
  backward(dx, dw, dy, x, w, d);
}
void channel_scale_backward(double* dx, double* dw, const double* dy, const double* x, const double* w,
                            const ChannelScaleDims& d) {
  backward(dx, dw, dy, x, w, d);
}

}  // namespace stretch::ops::ref
