// ops/layernorm_reference.cpp — the naive oracle for LayerNorm (biased variance, as torch):
//   mean = Σx/C, var = Σ(x−mean)²/C, rstd = 1/√(var+eps), out = (x−mean)·rstd·w + b.
// Backward with xhat = (x−mean)·rstd, g = w·dout:
//   dinp += rstd·(g − mean(g) − xhat·mean(g·xhat)), dweight += Σ_n dout·xhat, dbias += Σ_n dout.
// Row statistics in double; templated on the scalar for the float64 FD checks.
#include <cmath>

#include "ops/layernorm.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, const LayerNormDims& d) {
  const int64_t C = d.c;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* x = inp + n * C;
    double m = 0.0;
    for (int64_t c = 0; c < C; ++c) m += x[c];
    m /= static_cast<double>(C);
    double v = 0.0;
    for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    v /= static_cast<double>(C);
    const double r = 1.0 / std::sqrt(v + static_cast<double>(d.eps));
    for (int64_t c = 0; c < C; ++c) {
      double y = (x[c] - m) * r;
      if (weight) y *= weight[c];
      if (bias) y += bias[c];
      out[n * C + c] = static_cast<T>(y);
    }
    if (mean) mean[n] = static_cast<T>(m);
    if (rstd) rstd[n] = static_cast<T>(r);
  }
}

template <class T>
void backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
              const T* rstd, const LayerNormDims& d) {
  const int64_t C = d.c;
  for (int64_t n = 0; n < d.n; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    const double m = mean[n], r = rstd[n];
    double g_mean = 0.0, gx_mean = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - m) * r;
      const double g = (weight ? static_cast<double>(weight[c]) : 1.0) * dy[c];
      g_mean += g;
      gx_mean += g * xhat;
    }
    g_mean /= static_cast<double>(C);
    gx_mean /= static_cast<double>(C);
    if (dinp) {
      for (int64_t c = 0; c < C; ++c) {
        const double xhat = (x[c] - m) * r;
        const double g = (weight ? static_cast<double>(weight[c]) : 1.0) * dy[c];
        dinp[n * C + c] = static_cast<T>(dinp[n * C + c] + r * (g - g_mean - xhat * gx_mean));
      }
    }
  }
  // Parameter gradients: column sums over all rows in double, added once.
  for (int64_t c = 0; c < C; ++c) {
    double dw = 0.0, db = 0.0;
    for (int64_t n = 0; n < d.n; ++n) {
      const double xhat = (inp[n * C + c] - static_cast<double>(mean[n])) * static_cast<double>(rstd[n]);
      dw += static_cast<double>(dout[n * C + c]) * xhat;
      db += dout[n * C + c];
    }
    if (dweight) dweight[c] = static_cast<T>(dweight[c] + dw);
    if (dbias) dbias[c] = static_cast<T>(dbias[c] + db);
  }
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, const LayerNormDims& d) {
  forward(out, mean, rstd, inp, weight, bias, d);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const LayerNormDims& d) {
  backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, d);
}
void layernorm_forward(double* out, double* mean, double* rstd, const double* inp, const double* weight,
                       const double* bias, const LayerNormDims& d) {
  forward(out, mean, rstd, inp, weight, bias, d);
}
void layernorm_backward(double* dinp, double* dweight, double* dbias, const double* dout, const double* inp,
                        const double* weight, const double* mean, const double* rstd, const LayerNormDims& d) {
  backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, d);
}

}  // namespace stretch::ops::ref
