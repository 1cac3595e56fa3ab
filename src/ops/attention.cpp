// ops/attention.cpp — the attention op's parameter checks, its default scale and T5's bucket
// function: shared by the reference and the CPU kernel (contract in ops/attention.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/attention_span_mask.h"

namespace stretch::ops {
namespace {

[[noreturn]] void fail_param(const std::string& field, const std::string& what, const std::string& hint) {
  fail_usage("attention: " + field + " " + what, hint);
}

template <class T>
std::string str(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The relative-key options (ops/attention.h RelKeyOptions).
void check_relkey(const AttentionParams& p) {
  const RelKeyOptions& rk = p.relkey;
  if (rk.r == nullptr) {
    if (rk.u != nullptr || rk.w != nullptr)
      fail_param("relkey.u/relkey.w", "given without relkey.r", "the global biases belong to the relative-key term");
    return;
  }
  if (p.mask != AttentionMask::Causal)
    fail_param("relkey", "needs AttentionMask::Causal (distance = p_i - j)",
               "Transformer-XL and Adaptive Span are causal; use T5 or AlibiSym for bidirectional attention");
  if (rk.rows < 1) fail_param("relkey.rows", "must be >= 1, got " + str(rk.rows), "pass the number of rows of R");
  if (rk.dist0 < 0 || rk.dist0 > p.min_distance)
    fail_param("relkey.dist0", "(" + str(rk.dist0) + ") must be in [0, min_distance = " + str(p.min_distance) + "]",
               "every visible distance needs a row of R; Adaptive Span sets min_distance = 1 with dist0 = 1");
  if (rk.clamp < 0) fail_param("relkey.clamp", "must be >= 0 (0 = no clamp), got " + str(rk.clamp), "");
  const bool packed = rk.row_stride == 0 && rk.head_stride == 0 && rk.elem_stride == 0;
  if (!packed && (rk.elem_stride == 0 || rk.row_stride == 0 || (rk.share == RelKeyShare::PerHead && p.h > 1 &&
                                                                 rk.head_stride == 0)))
    fail_param("relkey strides", "need non-zero row and elem strides (and head stride for PerHead) (got row=" +
                                     str(rk.row_stride) + " head=" + str(rk.head_stride) + " elem=" +
                                     str(rk.elem_stride) + ")",
               "all three zero means packed [rows, H, D] (PerHead) or [rows, D] (Shared)");
  // The largest distance a visible key can have, and the row it reads.
  int64_t dmax = p.s - 1;
  const int64_t window = attn::span_effective_window(p);  // a renormalised span mask narrows it
  if (window > 0) dmax = std::min<int64_t>(dmax, window - 1);
  if (dmax < p.min_distance) return;  // nothing is visible: no row is read
  const int64_t need = (rk.clamp > 0 ? std::min(dmax, rk.clamp) : dmax) - rk.dist0 + 1;
  if (rk.rows < need)
    fail_param("relkey.rows", "(" + str(rk.rows) + ") cover distances " + str(rk.dist0) + ".." +
                                  str(rk.dist0 + rk.rows - 1) + " but distance " + str(rk.dist0 + need - 1) +
                                  " is visible",
               "pass R for every visible distance (S - 1, or window - 1), or set relkey.clamp");
}

}  // namespace

RelKeyStrides attention_relkey_strides(const AttentionParams& p) {
  const RelKeyOptions& rk = p.relkey;
  if (rk.row_stride != 0 || rk.head_stride != 0 || rk.elem_stride != 0)
    return {rk.row_stride, rk.share == RelKeyShare::Shared ? 0 : rk.head_stride, rk.elem_stride};
  if (rk.share == RelKeyShare::Shared) return {p.d, 0, 1};
  return {p.h * p.d, p.d, 1};
}

int64_t attention_relkey_row(const AttentionParams& p, int64_t dist) {
  const int64_t d = p.relkey.clamp > 0 ? std::min(dist, p.relkey.clamp) : dist;
  return d - p.relkey.dist0;
}

void attention_check(const AttentionParams& p) {
  if (p.b < 1 || p.h < 1 || p.t < 1 || p.d < 1)
    fail_param("shape", "needs B, H, T, D >= 1 (got B=" + str(p.b) + " H=" + str(p.h) + " T=" + str(p.t) +
                            " D=" + str(p.d) + ")",
               "an empty batch, sequence or head must not reach the attention op");
  if (p.s < p.t)
    fail_param("s", "(keys, " + str(p.s) + ") must be >= t (queries, " + str(p.t) + ")",
               "query i sits at key position S - T + i; pass the full key/value length");
  // Relative positions are handled as int32 inside the kernel and as float-exact integers.
  if (p.s >= (int64_t{1} << 24))
    fail_param("s", "(" + str(p.s) + ") exceeds 2^24 keys", "split the sequence into windows");
  if (!(p.scale >= 0.f) || !std::isfinite(p.scale))
    fail_param("scale", "must be finite and >= 0 (0 = 1/sqrt(D)), got " + str(p.scale), "");
  if (p.window < 0) fail_param("window", "must be >= 0 (0 = unlimited), got " + str(p.window), "");
  if (!(p.dropout.p >= 0.f && p.dropout.p < 1.f))
    fail_param("dropout.p", "must be in [0, 1), got " + str(p.dropout.p), "check --attention-dropout");
  const struct {
    const char* name;
    RowStrides r;
  } layouts[] = {{"layout.q", p.layout.q}, {"layout.kv", p.layout.kv}, {"layout.out", p.layout.out}};
  for (const auto& [name, r] : layouts) {
    const bool packed = r.batch == 0 && r.head == 0 && r.row == 0;
    if (!packed && (r.row < p.d || r.head < 0 || r.batch < 0))
      fail_param(name, "needs row >= D and head, batch >= 0 (got batch=" + str(r.batch) + " head=" + str(r.head) +
                           " row=" + str(r.row) + ", D=" + str(p.d) + ")",
                 "all zero means packed [B, H, T, D]");
  }
  if (p.min_distance < 0) fail_param("min_distance", "must be >= 0, got " + str(p.min_distance), "");
  if (p.min_distance > 0 && p.mask != AttentionMask::Causal)
    fail_param("min_distance", "needs AttentionMask::Causal", "Adaptive Span's distance >= 1 rule is causal");
  if (p.span.z != nullptr) {
    if (p.mask != AttentionMask::Causal) fail_param("span", "needs AttentionMask::Causal", "");
    if (p.span.heads != 1 && p.span.heads != p.h)
      fail_param("span.heads", "must be 1 or H = " + str(p.h) + ", got " + str(p.span.heads),
                 "per-head spans use H, adapt_span_layer uses 1");
    if (!(p.span.ramp > 0.f) || !std::isfinite(p.span.ramp))
      fail_param("span.ramp", "must be finite and > 0, got " + str(p.span.ramp), "--adapt-span-ramp (32)");
    if (p.span.max_span < 1) fail_param("span.max_span", "must be >= 1, got " + str(p.span.max_span), "--attn-span");
    for (int64_t h = 0; h < p.span.heads; ++h)
      if (!std::isfinite(p.span.z[h]))
        fail_param("span.z", "entry of head " + str(h) + " is not finite (" + str(p.span.z[h]) + ")",
                   "the span parameter diverged; check the learning rate");
  }
  check_relkey(p);
  switch (p.bias) {
    case BiasPolicy::None:
      break;
    case BiasPolicy::Alibi:
      if (p.mask != AttentionMask::Causal)
        fail_param("bias", "Alibi (-m(i-j)) is causal only",
                   "use BiasPolicy::AlibiSym (-m|i-j|) for bidirectional attention");
      [[fallthrough]];
    case BiasPolicy::AlibiSym:
      if (p.alibi.slopes == nullptr) fail_param("alibi.slopes", "is null", "pass alibi_slopes(H).data()");
      if (!(p.alibi.slope_scale > 0.f) || !std::isfinite(p.alibi.slope_scale))
        fail_param("alibi.slope_scale", "must be finite and > 0, got " + str(p.alibi.slope_scale),
                   "position interpolation uses L_train / L_eval");
      if (p.alibi.shape == AlibiShape::Clipped && !(p.alibi.cap > 0.f))
        fail_param("alibi.cap", "must be > 0 for AlibiShape::Clipped, got " + str(p.alibi.cap), "");
      break;
    case BiasPolicy::T5: {
      const int nb = p.t5.num_buckets;
      const int min_nb = p.mask == AttentionMask::Causal ? 2 : 4;
      if (p.t5.table == nullptr) fail_param("t5.table", "is null", "pass the [num_buckets, H] table");
      if (nb < min_nb || (p.mask == AttentionMask::Bidirectional && nb % 2 != 0))
        fail_param("t5.num_buckets", "must be >= " + str(min_nb) + " (and even when bidirectional), got " + str(nb),
                   "T5 uses 32");
      const int exact = (p.mask == AttentionMask::Causal ? nb : nb / 2) / 2;
      if (p.t5.max_distance <= exact)
        fail_param("t5.max_distance", "must exceed num_buckets/2 (or /4 bidirectional) = " + str(exact) + ", got " +
                                          str(p.t5.max_distance),
                   "T5 uses 128");
      break;
    }
  }
}

double span_mask_value(const SpanMaskOptions& o, double z, int64_t dist) {
  const double x = (static_cast<double>(o.ramp) + z * static_cast<double>(o.max_span) -
                    static_cast<double>(dist - 1)) / static_cast<double>(o.ramp);
  return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
}

double span_mask_dz(const SpanMaskOptions& o, double z, int64_t dist) {
  const double x = (static_cast<double>(o.ramp) + z * static_cast<double>(o.max_span) -
                    static_cast<double>(dist - 1)) / static_cast<double>(o.ramp);
  const bool closed = o.edges == SpanMaskEdges::Closed;
  const bool lower = closed && o.mode == SpanMaskMode::AfterSoftmax ? x >= 0.0 : x > 0.0;
  const bool upper = closed ? x <= 1.0 : x < 1.0;
  return lower && upper ? static_cast<double>(o.max_span) / static_cast<double>(o.ramp) : 0.0;
}

float attention_scale(const AttentionParams& p) {
  return p.scale > 0.f ? p.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.d)));
}

int t5_bucket(int64_t rel, int num_buckets, int max_distance, AttentionMask mask) {
  int ret = 0;
  int64_t n = -rel;
  int nb = num_buckets;
  if (mask == AttentionMask::Bidirectional) {
    nb /= 2;
    if (n < 0) ret += nb;
    n = n < 0 ? -n : n;
  } else {
    n = n < 0 ? 0 : n;
  }
  const int max_exact = nb / 2;
  if (n < max_exact) return ret + static_cast<int>(n);
  // torch: max_exact + (log(n.float() / max_exact) / math.log(max_distance / max_exact)
  //        * (num_buckets - max_exact)).to(long): float32 arithmetic, truncation.
  const float x = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                  static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                  static_cast<float>(nb - max_exact);
  const int large = max_exact + static_cast<int>(x);
  return ret + (large < nb - 1 ? large : nb - 1);
}

namespace {
RowStrides resolved(const RowStrides& r, int64_t h, int64_t t, int64_t d) {
  if (r.batch == 0 && r.head == 0 && r.row == 0) return {h * t * d, t * d, d};
  return r;
}
}  // namespace

RowStrides attention_rows_q(const AttentionParams& p) { return resolved(p.layout.q, p.h, p.t, p.d); }
RowStrides attention_rows_kv(const AttentionParams& p) { return resolved(p.layout.kv, p.h, p.s, p.d); }
RowStrides attention_rows_out(const AttentionParams& p) { return resolved(p.layout.out, p.h, p.t, p.d); }

}  // namespace stretch::ops
