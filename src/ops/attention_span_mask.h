// ops/attention_span_mask.h — internal to the fused kernel (attention_cpu*.cpp): Adaptive Span's soft mask
// m_h(d) (ops/attention.h SpanMaskOptions) as per-head tables over the distance d = p_i − j,
// column c = d + kRelPad (the relative-key packs' convention; negative distances, all masked, read 1).
//   AfterSoftmax:      P ← P·m before dropout and P·V (lse untouched); backward: dP = m·Z·(dO·v),
//                      dS = P(dP − delta) with delta_i = dO_i·out_i unchanged (out already holds
//                      the mask: Σ_j P_ij dP_ij = dO_i·Σ_j P_ij m_ij Z_ij v_j = dO_i·out_i), and
//                      ∂L/∂z_h = Σ P·Z·(dO·v)·∂m/∂z.
//   LogBeforeSoftmax:  score += log m (−inf where m = 0); ∂L/∂z_h = Σ dS·(∂m/∂z)/m.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/attention.h"

namespace stretch::ops::attn {

struct SpanMaskSetup {
  bool on = false, after = false;
  bool learn = false;           // dspan_z requested
  int64_t ncols = 0;            // kRelPad + S
  std::vector<float> m;         // [H, ncols] m_h(d) (AfterSoftmax) or log m_h(d) (LogBeforeSoftmax)
  std::vector<float> dz;        // [H, ncols] ∂m/∂z (AfterSoftmax) or (∂m/∂z)/m (LogBeforeSoftmax)
  const float* m_at(int64_t h, int64_t dist) const { return m.data() + h * ncols + pad() + dist; }
  const float* dz_at(int64_t h, int64_t dist) const { return dz.data() + h * ncols + pad() + dist; }
  static int64_t pad();
};

SpanMaskSetup span_mask_setup(const AttentionParams& p, const AttentionGrads* g);
// The window that bounds visible keys with the mask: LogBeforeSoftmax makes every distance with
// m_h = 0 for all heads invisible, so W narrows to the smallest d where that holds; otherwise W.
int64_t span_effective_window(const AttentionParams& p);

}  // namespace stretch::ops::attn
