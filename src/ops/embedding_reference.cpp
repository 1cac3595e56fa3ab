// ops/embedding_reference.cpp — naive oracle: row gather, and a scatter-add in id order.
#include "ops/embedding.h"

namespace stretch::ops::ref {
namespace {

template <class T>
void forward(T* out, const int32_t* ids, const T* table, T scale, const EmbeddingDims& d) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) out[n * d.c + c] = scale * table[static_cast<int64_t>(ids[n]) * d.c + c];
}

template <class T>
void backward(T* dtable, const T* dout, const int32_t* ids, T scale, const EmbeddingDims& d) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c && ids[n] != d.padding_idx; ++c) dtable[static_cast<int64_t>(ids[n]) * d.c + c] += scale * dout[n * d.c + c];
}

}  // namespace

void embedding_forward(float* out, const int32_t* ids, const float* table, float scale, const EmbeddingDims& d) {
  forward(out, ids, table, scale, d);
}
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, float scale, const EmbeddingDims& d) {
  backward(dtable, dout, ids, scale, d);
}
void embedding_forward(double* out, const int32_t* ids, const double* table, double scale, const EmbeddingDims& d) {
  forward(out, ids, table, scale, d);
}
void embedding_backward(double* dtable, const double* dout, const int32_t* ids, double scale,
                        const EmbeddingDims& d) {
  backward(dtable, dout, ids, scale, d);
}

}  // namespace stretch::ops::ref
