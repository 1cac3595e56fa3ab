// ops/channel_scale.h — y [N, C] = x [N, C] · w [C / G] with channel c scaled by w[c / G]: NormFormer's
// learned scales (fairseq --scale-resids: w_resid [C], G = 1, on the FFN's residual; --scale-heads:
// c_attn [H], G = C / H = D, on the attention output after out_proj, one scale per D-channel group).
// Backward: dx [N, C] += (= with dx_init Overwrite) dy · w[c / G]; dw [C / G] += Σ_n Σ_{c in group}
// dy · x, reduced in a fixed row order (cpu::reduce_rows: the same bits for any thread count).
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

struct ChannelScaleDims {
  int64_t n = 0;      // rows: B·T
  int64_t c = 0;      // channels C
  int64_t group = 1;  // G channels share one scale; C % G == 0, w has C / G entries
};

void channel_scale_forward(float* y, const float* x, const float* w, const ChannelScaleDims& d);
// dx may be null (x needs no gradient), dw may be null (w needs none).
void channel_scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                            const ChannelScaleDims& d, GradInit dx_init = GradInit::Accumulate);

namespace ref {
void channel_scale_forward(float* y, const float* x, const float* w, const ChannelScaleDims& d);
void channel_scale_backward(float* dx, float* dw, const float* dy, const float* x, const float* w,
                            const ChannelScaleDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void channel_scale_forward(double* y, const double* x, const double* w, const ChannelScaleDims& d);
void channel_scale_backward(double* dx, double* dw, const double* dy, const double* x, const double* w,
                            const ChannelScaleDims& d);
}  // namespace ref

}  // namespace stretch::ops
