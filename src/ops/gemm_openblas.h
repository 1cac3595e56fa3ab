// ops/gemm_openblas.h — the OpenBLAS route of gemm() (internal to ops/gemm_*.cpp).
#pragma once
#include <cstdint>

#include "ops/gemm.h"

namespace stretch::ops {

// Whether gemm_library() sends this plain fp32 product to OpenBLAS.
bool gemm_on_openblas(const GemmParams& p);

// C[M, N] = alpha · op(A) · op(B) + beta · C in fp32 with cblas_sgemm (row-major, leading
// dimensions resolved by the caller). Returns false, computing nothing, when a dimension exceeds
// OpenBLAS's 32-bit arguments.
bool openblas_sgemm(const GemmParams& p, const float* a, const float* b, float* c, int64_t lda, int64_t ldb,
                    int64_t ldc);

}  // namespace stretch::ops
