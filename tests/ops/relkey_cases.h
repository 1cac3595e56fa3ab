// tests/ops/relkey_cases.h — random problems for the attention op's relative-key term
// (ops/attention.h RelKeyOptions) and its minimum distance: q, k, v, dout, R in one of three
// memory layouts (packed by distance; Transformer-XL's order, rows for distances klen−1 … 0 with a
// negative row stride; Adaptive Span's key_pe [D, L], column ℓ = distance L − ℓ), u and w.
// Shared by the fast-vs-reference tests and the float64 gradient checks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"

namespace stretch::ops::testing {

enum class RLayout : uint8_t { Packed, TxlReversed, KeyPe };

struct RelCase {
  std::string name;
  int64_t b = 1, h = 2, t = 8, s = 8, d = 8;
  int64_t window = 0, min_distance = 0, clamp = 0;
  RelKeyShare share = RelKeyShare::PerHead;
  RLayout layout = RLayout::Packed;
  bool u = true, w = true;
  float dropout = 0.f;
  BiasPolicy bias = BiasPolicy::None;
  bool relkey = true;  // false: no relative-key term (R still allocated, unused)
  // Soft span mask (span_heads 0 = off): z_h = z0 + h·dz, ramp, max_span.
  int64_t span_heads = 0;
  SpanMaskMode span_mode = SpanMaskMode::AfterSoftmax;
  float z0 = 0.f, dz = 0.f, ramp = 32.f;
  int64_t max_span = 0;
};
inline void PrintTo(const RelCase& c, std::ostream* os) { *os << c.name; }

struct RelProblem {
  RelCase c;
  std::vector<float> q, k, v, dout, rbuf, u, w, slopes, z;
  int64_t rows = 0, dist0 = 0, hr = 1;
  int64_t off = 0;  // element of rbuf that relkey.r points at
  int64_t row_stride = 0, head_stride = 0, elem_stride = 0;

  explicit RelProblem(const RelCase& cs, uint64_t seed = 3) : c(cs) {
    Rng rng(seed, 17);
    auto fill = [&](std::vector<float>& x, size_t n, float lo, float hi) {
      x.resize(n);
      for (auto& e : x) e = rng.uniform(lo, hi);
    };
    fill(q, c.b * c.h * c.t * c.d, -1.f, 1.f);
    fill(k, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(v, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(dout, c.b * c.h * c.t * c.d, -1.f, 1.f);
    fill(u, c.h * c.d, -0.5f, 0.5f);
    fill(w, c.h * c.d, -0.5f, 0.5f);
    slopes = alibi_slopes(static_cast<int>(c.h));
    for (int64_t h = 0; h < c.span_heads; ++h) z.push_back(c.z0 + static_cast<float>(h) * c.dz);
    dist0 = c.min_distance;
    int64_t dmax = c.s - 1;
    if (c.window > 0) dmax = std::min(dmax, c.window - 1);
    rows = std::max<int64_t>(1, (c.clamp > 0 ? std::min(dmax, c.clamp) : dmax) - dist0 + 1);
    hr = c.share == RelKeyShare::Shared ? 1 : c.h;
    fill(rbuf, static_cast<size_t>(rows * hr * c.d), -1.f, 1.f);
    const int64_t D = c.d;
    switch (c.layout) {
      case RLayout::Packed:  // [rows, hr, D], row n = distance dist0 + n; zero strides = packed
        off = 0;
        break;
      case RLayout::TxlReversed:  // [rows, hr, D], buffer row j' = distance dist0 + rows − 1 − j'
        off = (rows - 1) * hr * D, row_stride = -hr * D, head_stride = hr == 1 ? 0 : D, elem_stride = 1;
        break;
      case RLayout::KeyPe:  // [hr, D, rows], column ℓ = distance dist0 + rows − 1 − ℓ
        off = rows - 1, row_stride = -1, head_stride = hr == 1 ? 0 : D * rows, elem_stride = rows;
        break;
    }
  }

  AttentionParams params() const {
    AttentionParams p;
    p.b = c.b, p.h = c.h, p.t = c.t, p.s = c.s, p.d = c.d;
    p.bias = c.bias;
    p.alibi.slopes = slopes.data();
    p.window = c.window;
    p.min_distance = c.min_distance;
    p.dropout = DropoutParams{.p = c.dropout, .seed = 77, .stream = 2};
    p.relkey = RelKeyOptions{.r = rbuf.data() + off,
                             .rows = rows,
                             .dist0 = dist0,
                             .share = c.share,
                             .row_stride = row_stride,
                             .head_stride = head_stride,
                             .elem_stride = elem_stride,
                             .u = c.u ? u.data() : nullptr,
                             .w = c.w ? w.data() : nullptr,
                             .clamp = c.clamp};
    if (!c.relkey) p.relkey = RelKeyOptions{};
    if (c.span_heads > 0)
      p.span = SpanMaskOptions{
          .z = z.data(), .heads = c.span_heads, .ramp = c.ramp, .max_span = c.max_span, .mode = c.span_mode};
    return p;
  }
  size_t n_rows() const { return static_cast<size_t>(c.b * c.h * c.t); }
};

}  // namespace stretch::ops::testing
