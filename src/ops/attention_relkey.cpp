// ops/attention_relkey.cpp — the relative-key term's per-call packs of R and the reduction of its
// per-(b, h) gradient partials (contract in ops/attention_relkey.h).
#include "ops/attention_relkey.h"

#include <algorithm>

namespace stretch::ops::attn {
namespace {

// Whether R's elements lie farther apart than its rows: then the packs are filled (and the gradient
// written back) element by element along the distances, the contiguous direction.
bool by_element(const RelKeyStrides& st) {
  const auto mag = [](int64_t v) { return v < 0 ? -v : v; };
  return mag(st.elem) > mag(st.row);
}

}  // namespace

RelKeySetup relkey_setup(const AttentionParams& p, const AttentionGrads* g) {
  RelKeySetup rs;
  const RelKeyOptions& rk = p.relkey;
  if (rk.r == nullptr) return rs;
  rs.on = true;
  rs.has_u = rk.u != nullptr;
  rs.has_w = rk.w != nullptr;
  rs.u = rk.u;
  rs.w = rk.w;
  if (g != nullptr) {
    rs.learn_r = g->drel_r != nullptr;
    rs.learn_u = g->drel_u != nullptr && rs.has_u;
    rs.learn_w = g->drel_w != nullptr && rs.has_w;
  }
  rs.hr = rk.share == RelKeyShare::Shared ? 1 : p.h;
  rs.d = p.d;
  rs.ncols = kRelPad + p.s + kNr;
  const RelKeyStrides st = attention_relkey_strides(p);
  const bool backward = g != nullptr;
  rs.rt.assign(static_cast<size_t>(rs.hr * rs.d * rs.ncols), 0.f);
  if (backward) rs.rrow.assign(rs.rt.size(), 0.f);
  // Whether distance dist has a row of R (keys at other distances are never visible: attention_check).
  const auto visible = [&](int64_t dist) {
    const int64_t n = attention_relkey_row(p, dist);
    return n >= 0 && n < rk.rows;
  };
  for (int64_t h = 0; h < rs.hr; ++h) {
    if (by_element(st)) {
      // R's elements of one row are far apart (Adaptive Span's key_pe [D, L]: elem stride L, row
      // stride −1): walk each element's run over the distances, which is contiguous, instead of
      // D loads L floats apart per distance (on one L1 set when L·4 is a multiple of 4 KiB).
      for (int64_t x = 0; x < rs.d; ++x)
        for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
          if (!visible(dist)) continue;
          const float val = rk.r[attention_relkey_row(p, dist) * st.row + h * st.head + x * st.elem];
          const int64_t c = kRelPad + dist;
          rs.rt[(h * rs.d + x) * rs.ncols + c] = val;
          if (backward) rs.rrow[(h * rs.ncols + c) * rs.d + x] = val;
        }
      continue;
    }
    for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
      if (!visible(dist)) continue;
      const float* row = rk.r + attention_relkey_row(p, dist) * st.row + h * st.head;
      const int64_t c = kRelPad + dist;
      for (int64_t x = 0; x < rs.d; ++x) {
        const float val = row[x * st.elem];
        rs.rt[(h * rs.d + x) * rs.ncols + c] = val;
        if (backward) rs.rrow[(h * rs.ncols + c) * rs.d + x] = val;
      }
    }
  }
  return rs;
}

RelKeyPartials relkey_partials(const RelKeySetup& rs, int64_t bh_count) {
  RelKeyPartials part;
  if (rs.learn_r) part.dr.assign(static_cast<size_t>(bh_count * rs.ncols * rs.d), 0.f);
  if (rs.learn_u) part.du.assign(static_cast<size_t>(bh_count * rs.d), 0.0);
  if (rs.learn_w) part.dw.assign(static_cast<size_t>(bh_count * rs.d), 0.0);
  return part;
}

void relkey_scatter_grad(const RelKeySetup& rs, const AttentionParams& p, const RelKeyPartials& part,
                         const AttentionGrads& extra) {
  const int64_t H = p.h, D = p.d;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t x = 0; x < D; ++x) {
      double u = 0.0, w = 0.0;
      for (int64_t b = 0; b < p.b; ++b) {
        if (rs.learn_u) u += part.du[(b * H + h) * D + x];
        if (rs.learn_w) w += part.dw[(b * H + h) * D + x];
      }
      if (rs.learn_u) extra.drel_u[h * D + x] += static_cast<float>(u);
      if (rs.learn_w) extra.drel_w[h * D + x] += static_cast<float>(w);
    }
  if (!rs.learn_r) return;
  const RelKeyStrides st = attention_relkey_strides(p);
  const int64_t per_group = H / rs.hr;  // heads summed into one R (all of them when Shared)
  // by_element: each distance's sums go to a [D, ncols] buffer first and are then added to R one
  // element's contiguous run at a time (see relkey_setup); the same sums in the same order.
  const bool transpose = by_element(st);
  std::vector<double> acc(static_cast<size_t>(D));
  std::vector<float> sums(transpose ? static_cast<size_t>(D * rs.ncols) : 0);
  for (int64_t g = 0; g < rs.hr; ++g) {
    for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
      const int64_t n = attention_relkey_row(p, dist);
      if (n < 0 || n >= p.relkey.rows) continue;
      const int64_t c = kRelPad + dist;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t b = 0; b < p.b; ++b)
        for (int64_t k = 0; k < per_group; ++k) {
          const int64_t bh = b * H + g * per_group + k;
          const float* src = part.dr.data() + (bh * rs.ncols + c) * D;
          for (int64_t x = 0; x < D; ++x) acc[x] += src[x];
        }
      if (transpose) {
        for (int64_t x = 0; x < D; ++x) sums[x * rs.ncols + c] = static_cast<float>(acc[x]);
        continue;
      }
      float* dst = extra.drel_r + n * st.row + g * st.head;
      for (int64_t x = 0; x < D; ++x) dst[x * st.elem] += static_cast<float>(acc[x]);
    }
    if (!transpose) continue;
    for (int64_t x = 0; x < D; ++x)
      for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
        const int64_t n = attention_relkey_row(p, dist);
        if (n < 0 || n >= p.relkey.rows) continue;
        extra.drel_r[n * st.row + g * st.head + x * st.elem] += sums[x * rs.ncols + kRelPad + dist];
      }
  }
}

}  // namespace stretch::ops::attn
