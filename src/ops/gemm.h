// ops/gemm.h — the one GEMM interface of stretch. Everything that multiplies matrices calls
// gemm() or gemm_batched(); the library behind it (oneDNN today, chosen by measurement: see
// docs/architecture.md) can be swapped here without touching callers.
// Row-major: C[M, N] = alpha · op(A) · op(B) + beta · C, op(X) = X or Xᵀ.
//   A is [M, K] (or [K, M] if trans_a), B is [K, N] (or [N, K] if trans_b).
#pragma once
#include <cstdint>

namespace stretch::ops {

enum class Trans : uint8_t { No, Yes };

struct GemmParams {
  Trans trans_a = Trans::No;
  Trans trans_b = Trans::No;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;   // 1.0 accumulates into C
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (the natural leading dimension)
};

// Fast path (oneDNN sgemm, multi-threaded over the OpenMP pool).
void gemm(const GemmParams& p, const float* a, const float* b, float* c);
// Naive triple loop with double accumulation: the oracle, kept forever.
void gemm_reference(const GemmParams& p, const float* a, const float* b, float* c);

// `batch` independent GEMMs with element strides between consecutive A, B, C matrices.
struct BatchStrides {
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void gemm_batched(const GemmParams& p, const BatchStrides& s, const float* a, const float* b, float* c);

}  // namespace stretch::ops
