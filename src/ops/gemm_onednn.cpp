// ops/gemm_onednn.cpp — gemm() on oneDNN's dnnl_sgemm (row-major, OpenMP-threaded).
#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"
#include "ops/gemm.h"

namespace stretch::ops {
namespace {
int64_t lead(int64_t given, int64_t natural) { return given > 0 ? given : natural; }
}  // namespace

void gemm(const GemmParams& p, const float* a, const float* b, float* c) {
  if (p.m == 0 || p.n == 0) return;
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  const int64_t lda = lead(p.lda, ta ? p.m : p.k);
  const int64_t ldb = lead(p.ldb, tb ? p.k : p.n);
  const int64_t ldc = lead(p.ldc, p.n);
  if (p.k == 0) {  // C = beta·C; oneDNN also handles it, but be explicit
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) c[i * ldc + j] = p.beta == 0.f ? 0.f : p.beta * c[i * ldc + j];
    return;
  }
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', p.m, p.n, p.k, p.alpha, a, lda, b, ldb,
                                p.beta, c, ldc);
  STRETCH_CHECK(st == dnnl_success, "dnnl_sgemm failed with status " << static_cast<int>(st));
}

void gemm_batched(const GemmParams& p, const BatchStrides& s, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < s.batch; ++i) gemm(p, a + i * s.stride_a, b + i * s.stride_b, c + i * s.stride_c);
}

}  // namespace stretch::ops
