// optim/grad_clip.h — gradient normalisation helpers of fairseq's train_step (REFERENCE §3.2).
// Contract:
//  * Each parameter is passed ONCE (a tied parameter is one parameter, counted once).
//  * Norms are accumulated in double over fixed blocks of elements, then summed in a fixed
//    order, so the result is the same for any thread count (fairseq: fp32 per-tensor norms).
//  * clip_grad_norm(params, max_norm) returns the L2 norm of all grads BEFORE clipping and,
//    when max_norm > 0, multiplies every grad by coef = min(1, max_norm / (norm + 1e-6)).
//    max_norm = 0 means no clipping (the norm is still returned). A non-finite norm leaves
//    the grads untouched: the caller checks it (fairseq skips or stops on NaN/inf).
#pragma once
#include <cstdint>
#include <span>

#include "optim/optimizer.h"

namespace stretch::optim {

// coef = min(1, max_norm / (total_norm + 1e-6)) for max_norm > 0, else 1.
double clip_coefficient(double total_norm, double max_norm);

double clip_grad_norm(std::span<const OptimParam> params, double max_norm);

// L2 norm of all grads (no change to them).
double grad_norm(std::span<const OptimParam> params);

// grad *= factor (rounded to float once, like torch's mul_ by a Python float).
void multiply_grads(std::span<const OptimParam> params, double factor);

// fairseq's train_step normalisation (multiply_grads(factor), then clip_grad_norm(max_norm)) in
// two passes over the gradients instead of four: the norm of the unscaled gradients (one read),
// then one multiply by factor·coef. Returns the norm of the scaled gradients before clipping
// (factor · ‖g‖, fairseq's gnorm). A non-finite norm means some gradient is NaN or ±inf: the
// gradients are left untouched and the norm is returned as is (the caller skips the update).
// Equal to the two-call form up to one float rounding per element (one multiply instead of two).
double scale_and_clip_grads(std::span<const OptimParam> params, double factor, double max_norm);
// The same without touching the gradients: norm = scale_and_clip_grads' return value, factor = the
// multiplier it would apply (factor · coef; 1 when nothing is to be done or the norm is not finite),
// for Optimizer::step(params, lr, factor), which folds the multiply into its update pass.
struct GradScale {
  double norm = 0.0;
  double factor = 1.0;
};
GradScale scale_and_clip_factor(std::span<const OptimParam> params, double factor, double max_norm);

// Σ x[i]² in double over fixed blocks, deterministic for any thread count.
double sum_of_squares(const float* x /*[N]*/, int64_t n);

}  // namespace stretch::optim
