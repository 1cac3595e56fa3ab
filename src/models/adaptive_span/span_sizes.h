// models/adaptive_span/span_sizes.h — the scalar arithmetic of Adaptive Span (REFERENCE §5.1,
// §5.2, §5.4; fairseq examples/adaptive_span/adaptive_span_attention.py and
// adaptive_span_model.py), written once, in double, as the reference the family, the attention
// kernel's soft mask and their tests share. No tensors here: sizes and values only.
//
// Symbols: L = attn_span (the maximum span), R = adapt_span_ramp, z = a head's (or layer's)
// span parameter current_val, d = distance from query to key (d ≥ 1: a query never attends to
// itself), M = block length (queries per block), 64 = the trimming granularity.
//
//   soft mask        m_z(d) = clamp((R + z·L − (d − 1)) / R, 0, 1)
//                    (fairseq: template ℓ = −(d−1) ∈ [1−L, 0], mask = clamp((ℓ + z·L)/R + 1, 0, 1),
//                    computed in float32 there; here in double)
//   ∂m/∂z            L/R where 0 ≤ (R + z·L − (d−1))/R ≤ 1 (torch's clamp passes the gradient
//                    at both edges, inclusive), else 0
//   max size         clamp(ceil(max_h z_h · L) + R, 0, L)         (get_current_max_size)
//   avg size         clamp(ceil(mean_h z_h · L) + R, 0, L)        (get_current_avg_size)
//   trim_len         64·floor(min(L − 1, L − max_size) / 64)       (get_trim_len; in [0, L−1])
//   cache size       min(L, L − trim_len + 64)                     (get_cache_size)
//   span S           L − trim_len: the keys a query sees after trimming, distances 1..S;
//                    key_pe keeps its last S columns [trim_len, L)
//   trim_memory      with C = rows of the cache handed to the layer, extra = trim_len − (L − C):
//                    extra > 0 drops the first `extra` cache rows, extra < 0 left-pads −extra zero
//                    rows, so keys = S + M rows: [cache (S rows) ‖ block (M rows)]
//   next cache       rows kept for the next block (layer input h_in, detached):
//                    size > M: min(C, size − M) rows of the old cache + all M rows of h_in
//                    (Python's slice old[:, −(size − M):] takes all of a shorter cache)
//                    size ≤ M: the last `size` rows of h_in
//   span loss        L·mean_h(z_h) per layer; the model's aux loss is
//                    aux_loss_scaler·Σ_layers L·mean_h(z_h)                        (§5.6)
//   logged spans     max_span = max over layers of max size; avg_span = mean over layers of
//                    avg size (both include the ramp R)
//
// Order in fairseq's forward that a family must keep: per layer, the next cache's size and the
// layer's trim_len are computed from z BEFORE the layer clamps z into [0, 1] (AdaptiveSpan.forward
// clamps after trim_memory), so an optimizer step that pushed z outside [0, 1] shapes one block's
// trimming with the unclamped value; the mask, the span loss and the logged spans use the clamped z.
#pragma once
#include <cstdint>
#include <span>

namespace stretch::models::adaptive_span {

inline constexpr int64_t kTrimGranularity = 64;  // fairseq's and the original's 64-step trimming

// The fixed sizes of one AdaptiveSpan module.
struct SpanShape {
  int64_t attn_span = 0;  // L ≥ 1
  int64_t ramp = 32;      // R ≥ 1 (adapt_span_ramp)
};

// m_z(d) for distance d ≥ 1.
double soft_mask(const SpanShape& s, double z, int64_t distance);
// ∂m_z(d)/∂z (torch's clamp gradient: L/R on the closed ramp, 0 outside).
double soft_mask_dz(const SpanShape& s, double z, int64_t distance);

// clamp(ceil(z·L) + R, 0, L): z is max_h z_h for the max size, mean_h z_h for the avg size.
int64_t span_size(const SpanShape& s, double z);
// 64·floor(min(L − 1, L − max_size)/64).
int64_t trim_len(const SpanShape& s, int64_t max_size);
// min(L, L − trim_len + 64).
int64_t cache_size(const SpanShape& s, int64_t trim_len);

// What trim_memory does to a layer's keys for a cache of cache_rows rows.
struct TrimPlan {
  int64_t drop_front = 0;    // cache rows dropped from the front
  int64_t pad_front = 0;     // zero rows added in front
  int64_t key_pe_start = 0;  // first key_pe column kept (= trim_len)
  int64_t span = 0;          // S = L − trim_len: cache rows after trimming, distances 1..S
};
TrimPlan trim_plan(const SpanShape& s, int64_t trim_len, int64_t cache_rows);

// Rows of the next block's cache: from the old cache (its last `from_cache` rows) and from the
// layer input h_in (its last `from_input` rows), in that order.
struct NextCache {
  int64_t from_cache = 0;
  int64_t from_input = 0;
};
NextCache next_cache(int64_t cache_size, int64_t cache_rows, int64_t block_len);

// L·mean(z) of one layer's span parameters ([H], or [1] with adapt_span_layer).
double span_loss(const SpanShape& s, std::span<const float> z);

}  // namespace stretch::models::adaptive_span
