// models/adaptive_span/span_cache.h — Adaptive Span's hidden-state cache (REFERENCE.md §5.2;
// fairseq's AdaptiveSpanTransformer._mems), the family's SegmentState.
// Contract:
//   * Per layer l, the cache holds the last rows of layer l's INPUTS h_in [B, rows_l, C], detached.
//     A fresh cache is made by the model on first use: zeros of get_cache_size() rows per layer
//     (fairseq's init_hid_cache), from the span parameters as they are then.
//   * After each block the model replaces layer l's cache by next_cache() rows of
//     [old cache ‖ h_in] (span_sizes.h); sizes differ per layer and change as the spans learn.
//   * The batch size B is fixed while the cache is held (a usage error otherwise).
//   * save()/load(): "span_cache.<l>" [B, rows_l, C] F32 per layer and "span_cache.position" [1] I64,
//     so checkpoint_last continues bit-identically.
#pragma once
#include <cstdint>
#include <vector>

#include "models/language_model.h"

namespace stretch::models {

class SpanCache final : public SegmentState {
 public:
  explicit SpanCache(int64_t layers) : layers_(static_cast<size_t>(layers)) {}
  int64_t position() const override { return position_; }
  int64_t kept() const override;  // rows of the shortest layer cache
  void keep_last(int64_t memory) override;
  NamedTensors save() const override;
  void load(const NamedTensors& tensors) override;

  bool empty() const { return !layers_.empty() && !layers_[0].defined(); }
  int64_t rows() const { return empty() ? 0 : layers_[0].dim(0); }  // B
  const Tensor& layer(int64_t l) const { return layers_.at(static_cast<size_t>(l)); }
  void set_layer(int64_t l, Tensor t) { layers_.at(static_cast<size_t>(l)) = std::move(t); }
  void advance(int64_t tokens) { position_ += tokens; }
  // Usage error unless a block of `rows` streams can continue this cache.
  void check_rows(int64_t rows) const;

 private:
  std::vector<Tensor> layers_;  // [layers] of [B, rows_l, C]
  int64_t position_ = 0;
};

}  // namespace stretch::models
