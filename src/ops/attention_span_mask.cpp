// ops/attention_span_mask.cpp — the soft span mask's per-call tables and the window it implies
// (contract in ops/attention_span_mask.h).
#include "ops/attention_span_mask.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/attention_relkey.h"

namespace stretch::ops::attn {

int64_t SpanMaskSetup::pad() { return kRelPad; }

SpanMaskSetup span_mask_setup(const AttentionParams& p, const AttentionGrads* g) {
  SpanMaskSetup sm;
  const SpanMaskOptions& o = p.span;
  if (o.z == nullptr) return sm;
  sm.on = true;
  sm.after = o.mode == SpanMaskMode::AfterSoftmax;
  sm.learn = g != nullptr && g->dspan_z != nullptr;
  sm.ncols = kRelPad + p.s;
  sm.m.assign(static_cast<size_t>(p.h * sm.ncols), sm.after ? 1.f : 0.f);
  sm.dz.assign(sm.m.size(), 0.f);
  for (int64_t h = 0; h < p.h; ++h) {
    const double z = o.z[o.heads == 1 ? 0 : h];
    for (int64_t d = 0; d < p.s; ++d) {
      const double m = span_mask_value(o, z, d), dm = span_mask_dz(o, z, d);
      const size_t at = static_cast<size_t>(h * sm.ncols + kRelPad + d);
      if (sm.after) {
        sm.m[at] = static_cast<float>(m);
        sm.dz[at] = static_cast<float>(dm);
      } else {
        sm.m[at] = m > 0.0 ? static_cast<float>(std::log(m)) : -std::numeric_limits<float>::infinity();
        sm.dz[at] = m > 0.0 ? static_cast<float>(dm / m) : 0.f;
      }
    }
  }
  return sm;
}

int64_t span_effective_window(const AttentionParams& p) {
  if (p.span.z == nullptr || p.span.mode != SpanMaskMode::LogBeforeSoftmax) return p.window;
  // m_h(d) = 0 iff d − 1 >= R + z_h·L; the first such d over all heads bounds the window.
  double zmax = -std::numeric_limits<double>::infinity();
  for (int64_t h = 0; h < p.span.heads; ++h) zmax = std::max(zmax, static_cast<double>(p.span.z[h]));
  const double edge = static_cast<double>(p.span.ramp) + zmax * static_cast<double>(p.span.max_span) + 1.0;
  if (edge > static_cast<double>(p.s)) return p.window;  // reaches every key
  const int64_t w = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(edge)));
  return p.window > 0 ? std::min(p.window, w) : w;
}

}  // namespace stretch::ops::attn
