// ops/dropout_reference.cpp — naive oracle: one dropout_keep() call per element.
// Scale 1/(1−p) computed in the element type (float: 1.0f/(1.0f−p), as torch).
#include <algorithm>

#include "core/error.h"
#include "ops/dropout.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void apply(T* out, const T* inp, int64_t n, const DropoutParams& p, bool accumulate) {
  STRETCH_CHECK(p.p >= 0.f && p.p < 1.f, "dropout p=" << p.p << " must be in [0, 1)");
  const T scale = T(1) / (T(1) - static_cast<T>(p.p));
  for (int64_t i = 0; i < n; ++i) {
    const T v = dropout_keep(p, i) ? inp[i] * scale : T(0);
    out[i] = accumulate ? out[i] + v : v;
  }
}

}  // namespace

void dropout_forward(float* out, const float* inp, int64_t n, const DropoutParams& p) { apply(out, inp, n, p, false); }
void dropout_backward(float* dinp, const float* dout, int64_t n, const DropoutParams& p) {
  apply(dinp, dout, n, p, true);
}
// out = res + dropout(inp): the residual copied, then dropout accumulated onto it.
void dropout_add_forward(float* out, const float* res, const float* inp, int64_t n, const DropoutParams& p) {
  std::copy_n(res, n, out);
  apply(out, inp, n, p, true);
}
void dropout_forward(double* out, const double* inp, int64_t n, const DropoutParams& p) {
  apply(out, inp, n, p, false);
}
void dropout_backward(double* dinp, const double* dout, int64_t n, const DropoutParams& p) {
  apply(dinp, dout, n, p, true);
}
void dropout_add_forward(double* out, const double* res, const double* inp, int64_t n, const DropoutParams& p) {
  std::copy_n(res, n, out);
  apply(out, inp, n, p, true);
}

}  // namespace stretch::ops::ref
