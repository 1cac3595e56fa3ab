// ops/cross_entropy.h — fused log-softmax + negative log-likelihood over the vocabulary, with
// an ignore index (fairseq's pad = 1) and sum or mean reduction. Forward keeps the per-row
// log-sum-exp; backward writes softmax − onehot without storing probabilities.
// Targets must be in [0, V) or equal ignore_index (checked; a bad one throws stretch::Error
// naming its offset). When every row is ignored, count = 0 and the loss is 0 under both
// reductions (torch's mean would give NaN) and backward adds nothing.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/grad_init.h"

namespace stretch::ops {

enum class Reduction : uint8_t { Sum, Mean };

struct CrossEntropyDims {
  int64_t n = 0;  // rows: B·T
  int64_t v = 0;  // V
  int32_t ignore_index = -100;
  Reduction reduction = Reduction::Sum;
};

struct CrossEntropyResult {
  double loss = 0;      // reduced NLL in nats (sum, or sum / count)
  int64_t count = 0;    // rows whose target != ignore_index
};

// losses [N] (nats, 0 for ignored rows; may be null), lse [N] saved for backward.
CrossEntropyResult cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                                         const CrossEntropyDims& d);
// dlogits [N, V] += dloss · (softmax(logits) − onehot(target)) / (count if Mean); ignored rows get 0.
// With GradInit::Overwrite dlogits is written (=), and may alias logits (the gradient replaces
// the logits in place: training's output layer needs no second [N, V] buffer).
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                            float dloss, int64_t count, const CrossEntropyDims& d,
                            GradInit init = GradInit::Accumulate);

// Training's fused form, in place over the logits (one expf pass per element instead of two):
// forward overwrites x [N, V] with e = exp(x − rowmax) and writes inv_sum [N] = 1 / Σ_v e, plus the
// same result, losses and lse (each may be null) as cross_entropy_forward; backward turns e into
// dloss · (e·inv_sum − onehot(target)) / (count if Mean) in place, ignored rows 0. Together they
// equal cross_entropy_forward + cross_entropy_backward(GradInit::Overwrite) up to float rounding.
CrossEntropyResult cross_entropy_forward_inplace(float* x, float* inv_sum, float* losses, float* lse,
                                                 const int32_t* targets, const CrossEntropyDims& d);
void cross_entropy_backward_inplace(float* x, const float* inv_sum, const int32_t* targets, float dloss,
                                    int64_t count, const CrossEntropyDims& d);

// Evaluation's log-sum-exp over logits that arrive a column block at a time (nn/chunked_nll.cpp
// projects the vocabulary in blocks that stay in cache instead of writing [m, V] to memory): each
// row's running max and Σ exp(x − max), carried from block to block (cross_entropy_forward's online
// softmax, whose chunks are kLseColumnAlign wide). A block must start at a multiple of
// kLseColumnAlign, and every block but a row's last be a multiple of it wide: the rows' value() is
// then bitwise cross_entropy_forward's lse.
inline constexpr int64_t kLseColumnAlign = 512;
struct RunningLse {
  float max = -std::numeric_limits<float>::infinity();
  double sum = 0.0;
  double value() const { return static_cast<double>(max) + std::log(sum); }
};
// rows [n] += block [n, width] (row stride ld), the columns [first, first + width) of each row.
void lse_accumulate(RunningLse* rows, const float* block, int64_t n, int64_t width, int64_t ld, int64_t first);

// Every target in [0, V) or the ignore index, else stretch::Error naming the offset (forward's check).
void check_cross_entropy_targets(const int32_t* targets, const CrossEntropyDims& d);

namespace ref {
CrossEntropyResult cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                                         const CrossEntropyDims& d);
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                            float dloss, int64_t count, const CrossEntropyDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
CrossEntropyResult cross_entropy_forward(double* losses, double* lse, const double* logits, const int32_t* targets,
                                         const CrossEntropyDims& d);
void cross_entropy_backward(double* dlogits, const double* logits, const double* lse, const int32_t* targets,
                            double dloss, int64_t count, const CrossEntropyDims& d);
}  // namespace ref

}  // namespace stretch::ops
