// ops/cross_entropy_softmax.h — a second form of training's fused in-place cross-entropy
// (ops/cross_entropy.h: cross_entropy_forward_inplace / cross_entropy_backward_inplace).
// Contract: with InplaceForm::Softmax (Reduction::Sum only) forward also turns e = exp(x − rowmax)
// into e·inv_sum in the same row pass (the row still in cache), which is backward's product at
// dloss 1, so backward is left with the target's −dloss (and ×dloss when dloss ≠ 1): one pass over
// [N, V] less. At dloss = 1 (training's summed loss) loss, inv_sum and gradient are bitwise the
// Exp form's; otherwise the product is (e·inv_sum)·dloss instead of e·(dloss·inv_sum), one more
// float rounding per element. InplaceForm::Exp is exactly the two functions of cross_entropy.h.
#pragma once
#include <cstdint>

#include "ops/cross_entropy.h"

namespace stretch::ops {

enum class InplaceForm : uint8_t { Exp, Softmax };

// x [N, V] in place, inv_sum [N], losses / lse [N] (may be null): as cross_entropy_forward_inplace.
CrossEntropyResult cross_entropy_forward_inplace(float* x, float* inv_sum, float* losses, float* lse,
                                                 const int32_t* targets, const CrossEntropyDims& d, InplaceForm form);
// x [N, V]: forward's output of the same form, becomes the gradient of the loss.
void cross_entropy_backward_inplace(float* x, const float* inv_sum, const int32_t* targets, float dloss,
                                    int64_t count, const CrossEntropyDims& d, InplaceForm form);

}  // namespace stretch::ops
