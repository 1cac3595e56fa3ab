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
  const int64_t n = rs.hr * rs.d * rs.ncols;
  rs.rt = cpu::Scratch(n);  // every element written below (from the tensor pool: no fresh pages per call)
  if (backward) rs.rrow = cpu::Scratch(n);
  float* rt = rs.rt.data();
  float* rrow = rs.rrow.data();
  const int64_t D = rs.d, ncols = rs.ncols;
  // R's row for distance dist (c = kRelPad + dist), or null: no row (a negative distance, padding,
  // a distance past R's rows), where the packs hold 0 (such keys are never visible: attention_check).
  const auto row_of = [&](int64_t c) -> const float* {
    const int64_t dist = c - kRelPad;
    if (dist < p.min_distance || dist >= p.s) return nullptr;
    const int64_t row = attention_relkey_row(p, dist);
    return row >= 0 && row < rk.rows ? rk.r + row * st.row : nullptr;
  };
  if (by_element(st)) {
    // R's elements of one row are far apart (Adaptive Span's key_pe [D, L]: elem stride L, row
    // stride −1): walk each element's run over the distances, which is contiguous, instead of
    // D loads L floats apart per distance (on one L1 set when L·4 is a multiple of 4 KiB).
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t h = 0; h < rs.hr; ++h)
      for (int64_t x = 0; x < D; ++x)
        for (int64_t c = 0; c < ncols; ++c) {
          const float* row = row_of(c);
          const float val = row != nullptr ? row[h * st.head + x * st.elem] : 0.f;
          rt[(h * D + x) * ncols + c] = val;
          if (backward) rrow[(h * ncols + c) * D + x] = val;
        }
    return rs;
  }
  // Row by row, in blocks of columns per thread (each block's rt entries are D runs of its width).
  constexpr int64_t kCols = 64;
  const int64_t blocks = (ncols + kCols - 1) / kCols;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t h = 0; h < rs.hr; ++h)
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t c = blk * kCols; c < std::min(ncols, (blk + 1) * kCols); ++c) {
        const float* row = row_of(c);
        for (int64_t x = 0; x < D; ++x) {
          const float val = row != nullptr ? row[h * st.head + x * st.elem] : 0.f;
          rt[(h * D + x) * ncols + c] = val;
          if (backward) rrow[(h * ncols + c) * D + x] = val;
        }
      }
  return rs;
}

RelKeyPartials relkey_partials(const RelKeySetup& rs, int64_t bh_count) {
  RelKeyPartials part;
  if (rs.learn_r) part.dr = cpu::Scratch(bh_count * rs.ncols * rs.d);  // zeroed per task
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
  const int64_t ncols = rs.ncols;
  const auto row_of = [&](int64_t dist) {
    const int64_t n = attention_relkey_row(p, dist);
    return n >= 0 && n < p.relkey.rows ? n : int64_t{-1};
  };
  // Each distance's sum over (b, head of the group), in double, in parallel over distances; then
  // added to R's rows in distance order (clamped distances share a row), element-run by element
  // run when R's elements lie farther apart than its rows (see relkey_setup).
  cpu::Scratch sum_buf(rs.hr * ncols * D);  // read only where written
  float* const sums = sum_buf.data();
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(static)
    for (int64_t g = 0; g < rs.hr; ++g)
      for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
        if (row_of(dist) < 0) continue;
        const int64_t c = kRelPad + dist;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t b = 0; b < p.b; ++b)
          for (int64_t k = 0; k < per_group; ++k) {
            const int64_t bh = b * H + g * per_group + k;
            const float* src = part.dr.data() + (bh * ncols + c) * D;
            for (int64_t x = 0; x < D; ++x) acc[x] += src[x];
          }
        float* out = sums + (g * ncols + c) * D;
        for (int64_t x = 0; x < D; ++x) out[x] = static_cast<float>(acc[x]);
      }
  }
  const bool transpose = by_element(st);
  for (int64_t g = 0; g < rs.hr; ++g) {
    if (!transpose) {
      for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
        const int64_t n = row_of(dist);
        if (n < 0) continue;
        const float* sum = sums + (g * ncols + kRelPad + dist) * D;
        float* dst = extra.drel_r + n * st.row + g * st.head;
        for (int64_t x = 0; x < D; ++x) dst[x * st.elem] += sum[x];
      }
      continue;
    }
    for (int64_t x = 0; x < D; ++x)
      for (int64_t dist = p.min_distance; dist < p.s; ++dist) {
        const int64_t n = row_of(dist);
        if (n < 0) continue;
        extra.drel_r[n * st.row + g * st.head + x * st.elem] += sums[(g * ncols + kRelPad + dist) * D + x];
      }
  }
}

}  // namespace stretch::ops::attn
