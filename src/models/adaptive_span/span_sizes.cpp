// models/adaptive_span/span_sizes.cpp — Adaptive Span's scalar arithmetic (contract in span_sizes.h).
#include "models/adaptive_span/span_sizes.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stretch::models::adaptive_span {
namespace {

void check_shape(const SpanShape& s) {
  STRETCH_CHECK(s.attn_span >= 1, "attn_span " << s.attn_span << " (must be >= 1)");
  STRETCH_CHECK(s.ramp >= 1, "adapt_span_ramp " << s.ramp << " (must be >= 1)");
}

// (R + z·L − (d − 1)) / R, the mask before the clamp.
double ramp_value(const SpanShape& s, double z, int64_t d) {
  check_shape(s);
  STRETCH_CHECK(d >= 1, "distance " << d << " (a query attends to distances >= 1)");
  const double r = static_cast<double>(s.ramp);
  return (r + z * static_cast<double>(s.attn_span) - static_cast<double>(d - 1)) / r;
}

}  // namespace

double soft_mask(const SpanShape& s, double z, int64_t distance) {
  return std::clamp(ramp_value(s, z, distance), 0.0, 1.0);
}

double soft_mask_dz(const SpanShape& s, double z, int64_t distance) {
  const double v = ramp_value(s, z, distance);
  return (v >= 0.0 && v <= 1.0) ? static_cast<double>(s.attn_span) / static_cast<double>(s.ramp) : 0.0;
}

int64_t span_size(const SpanShape& s, double z) {
  check_shape(s);
  STRETCH_CHECK(std::isfinite(z), "span parameter " << z << " is not finite");
  const double size = std::ceil(z * static_cast<double>(s.attn_span)) + static_cast<double>(s.ramp);
  return static_cast<int64_t>(std::clamp(size, 0.0, static_cast<double>(s.attn_span)));
}

int64_t trim_len(const SpanShape& s, int64_t max_size) {
  check_shape(s);
  STRETCH_CHECK(max_size >= 0 && max_size <= s.attn_span, "max size " << max_size << " outside [0, " << s.attn_span << "]");
  const int64_t t = std::min(s.attn_span - 1, s.attn_span - max_size);  // ≥ 0
  return t / kTrimGranularity * kTrimGranularity;                       // floor for t ≥ 0
}

int64_t cache_size(const SpanShape& s, int64_t trim) {
  check_shape(s);
  STRETCH_CHECK(trim >= 0 && trim < s.attn_span, "trim_len " << trim << " outside [0, " << s.attn_span << ")");
  return std::min(s.attn_span, s.attn_span - trim + kTrimGranularity);
}

TrimPlan trim_plan(const SpanShape& s, int64_t trim, int64_t cache_rows) {
  check_shape(s);
  STRETCH_CHECK(trim >= 0 && trim < s.attn_span, "trim_len " << trim << " outside [0, " << s.attn_span << ")");
  STRETCH_CHECK(cache_rows >= 0, "cache rows " << cache_rows);
  const int64_t extra = trim - (s.attn_span - cache_rows);
  return {.drop_front = std::max<int64_t>(extra, 0),
          .pad_front = std::max<int64_t>(-extra, 0),
          .key_pe_start = trim,
          .span = s.attn_span - trim};
}

NextCache next_cache(int64_t size, int64_t cache_rows, int64_t block_len) {
  STRETCH_CHECK(size >= 1 && cache_rows >= 0 && block_len >= 1,
                "cache size " << size << ", cache rows " << cache_rows << ", block " << block_len);
  if (size > block_len) return {.from_cache = std::min(cache_rows, size - block_len), .from_input = block_len};
  return {.from_cache = 0, .from_input = size};
}

double span_loss(const SpanShape& s, std::span<const float> z) {
  check_shape(s);
  STRETCH_CHECK(!z.empty(), "a span module has at least one parameter");
  double sum = 0.0;
  for (float v : z) sum += static_cast<double>(v);
  return static_cast<double>(s.attn_span) * (sum / static_cast<double>(z.size()));
}

}  // namespace stretch::models::adaptive_span
