// ops/embedding.h — token embedding lookup; backward is a scatter-add into the table.
// Ids must be in [0, V); the caller validates data (data layer); the fast path also checks
// (one cheap pass) and throws stretch::Error naming the offending offset instead of reading
// out of bounds.
#pragma once
#include <cstdint>

namespace stretch::ops {

struct EmbeddingDims {
  int64_t n = 0;  // number of ids: B·T
  int64_t v = 0;  // rows in the table: V
  int64_t c = 0;  // C
  int32_t padding_idx = -1;  // backward adds nothing into this row (torch's padding_idx); -1: none
};

// out [N, C] = scale · table [V, C] [ids [N]]
void embedding_forward(float* out, const int32_t* ids, const float* table, float scale, const EmbeddingDims& d);
// dtable [V, C] += scale · Σ_{n: ids[n]=v, v != padding_idx} dout[n]   (deterministic: same result for any thread count)
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, float scale, const EmbeddingDims& d);

namespace ref {
void embedding_forward(float* out, const int32_t* ids, const float* table, float scale, const EmbeddingDims& d);
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, float scale, const EmbeddingDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void embedding_forward(double* out, const int32_t* ids, const double* table, double scale, const EmbeddingDims& d);
void embedding_backward(double* dtable, const double* dout, const int32_t* ids, double scale,
                        const EmbeddingDims& d);
}  // namespace ref

}  // namespace stretch::ops
