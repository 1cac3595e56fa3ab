// ops/gemm_reference.cpp — the naive oracle for gemm(): double accumulation, no blocking; under
// Bf16 each input element is rounded to bf16 first (tensor/dtype.h's float_to_bf16).
#include "ops/gemm.h"
#include "tensor/dtype.h"

namespace stretch::ops {

void gemm_reference(const GemmParams& p, const float* a, const float* b, float* c) {
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  const int64_t lda = p.lda > 0 ? p.lda : (ta ? p.m : p.k);
  const int64_t ldb = p.ldb > 0 ? p.ldb : (tb ? p.k : p.n);
  const int64_t ldc = p.ldc > 0 ? p.ldc : p.n;
  auto in = [&](float x) -> double {
    return p.precision == GemmPrecision::Bf16 ? static_cast<double>(bf16_to_float(float_to_bf16(x)))
                                              : static_cast<double>(x);
  };
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0.0;
      for (int64_t l = 0; l < p.k; ++l) {
        double x = in(ta ? a[l * lda + i] : a[i * lda + l]);
        double y = in(tb ? b[j * ldb + l] : b[l * ldb + j]);
        acc += x * y;
      }
      double prev = p.beta == 0.f ? 0.0 : static_cast<double>(p.beta) * c[i * ldc + j];
      double r = p.alpha * acc + prev + (p.bias ? static_cast<double>(p.bias[j]) : 0.0);
      if (p.epilogue == GemmEpilogue::Relu && r < 0) r = 0;
      c[i * ldc + j] = static_cast<float>(r);
    }
  }
}

}  // namespace stretch::ops
