// tests/ops/attention_cases.h — the attention op-test registry: named cases (shape, mask,
// bias policy and its options, window, key padding, dropout, learnable bias) and a Problem
// that owns random inputs for one case and builds its AttentionParams. Shared by the
// fast-vs-reference tests and the float64 gradient checks.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/alibi.h"
#include "ops/attention.h"

namespace stretch::ops::testing {

enum class Padding : uint8_t {
  None,
  Some,       // every 5th key padded (in batch 0 also the first few keys)
  AllMasked,  // batch 0: the first S − T + 3 keys padded, so causal queries 0..2 see no key
  Batch0,     // batch 0: every key padded, so none of its queries sees a key (any mask)
};

enum class Learn : uint8_t { No, Yes };

struct AttnCase {
  std::string name;
  int64_t b = 1, h = 1, t = 1, s = 1, d = 8;
  AttentionMask mask = AttentionMask::Causal;
  BiasPolicy bias = BiasPolicy::None;
  AlibiShape shape = AlibiShape::Linear;
  float cap = 0.f;
  float slope_scale = 1.f;
  int num_buckets = 32, max_distance = 128;
  int64_t window = 0;
  Padding padding = Padding::None;
  float dropout = 0.f;
  Learn learn = Learn::No;
};

// gtest prints a case by its name.
inline void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

// Random inputs and parameters of one case, in float; to_double() copies for the f64 oracle.
struct Problem {
  AttnCase c;
  std::vector<float> q, k, v, dout, slopes, table;  // [B,H,T,D] [B,H,S,D] x2 [B,H,T,D] [H] [NB,H]
  std::vector<uint8_t> pad;                         // [B, S]

  explicit Problem(const AttnCase& cs, uint64_t seed = 1) : c(cs) {
    Rng rng(seed, 11);
    auto fill = [&](std::vector<float>& x, size_t n, float lo, float hi) {
      x.resize(n);
      for (auto& e : x) e = rng.uniform(lo, hi);
    };
    fill(q, c.b * c.h * c.t * c.d, -1.f, 1.f);
    fill(k, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(v, c.b * c.h * c.s * c.d, -1.f, 1.f);
    fill(dout, c.b * c.h * c.t * c.d, -1.f, 1.f);
    slopes = alibi_slopes(static_cast<int>(c.h));
    fill(table, static_cast<size_t>(c.num_buckets) * c.h, -1.f, 1.f);
    pad.assign(c.b * c.s, 0);
    if (c.padding == Padding::Some)
      for (int64_t b = 0; b < c.b; ++b)
        for (int64_t j = 0; j < c.s; ++j) pad[b * c.s + j] = (j % 5 == 3) || (b == 0 && j < 2);
    if (c.padding == Padding::AllMasked)
      for (int64_t j = 0; j < std::min(c.s, c.s - c.t + 3); ++j) pad[j] = 1;
    if (c.padding == Padding::Batch0) std::fill(pad.begin(), pad.begin() + c.s, uint8_t{1});
  }

  AttentionParams params() const {
    AttentionParams p;
    p.b = c.b, p.h = c.h, p.t = c.t, p.s = c.s, p.d = c.d;
    p.mask = c.mask;
    p.bias = c.bias;
    p.alibi = AlibiOptions{.slopes = slopes.data(), .slope_scale = c.slope_scale, .shape = c.shape, .cap = c.cap};
    p.t5 = T5Options{.table = table.data(), .num_buckets = c.num_buckets, .max_distance = c.max_distance};
    p.window = c.window;
    p.key_padding = c.padding == Padding::None ? nullptr : pad.data();
    p.dropout = DropoutParams{.p = c.dropout, .seed = 1234, .stream = 5};
    return p;
  }
  size_t n_q() const { return q.size(); }
  size_t n_kv() const { return k.size(); }
  size_t n_rows() const { return static_cast<size_t>(c.b * c.h * c.t); }
};

inline std::vector<double> to_double(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// max |a − b| / max(max |b|, floor): an error relative to the tensor's scale.
inline double scaled_error(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-3) {
  double err = 0.0, mag = floor;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isinf(y) || std::isinf(x)) {
      if (x != y) return INFINITY;
      continue;
    }
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    err = std::max(err, std::abs(x - y));
    mag = std::max(mag, std::abs(y));
  }
  return err / mag;
}

}  // namespace stretch::ops::testing
