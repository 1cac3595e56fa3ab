// models/adaptive_span/span_cache.cpp — see span_cache.h.
#include "models/adaptive_span/span_cache.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace stretch::models {

int64_t SpanCache::kept() const {
  if (empty()) return 0;
  int64_t n = layers_[0].dim(1);
  for (const Tensor& t : layers_) n = std::min(n, t.dim(1));
  return n;
}

void SpanCache::keep_last(int64_t memory) {
  for (Tensor& t : layers_) {
    if (!t.defined() || t.dim(1) <= memory) continue;
    const int64_t B = t.dim(0), R = t.dim(1), C = t.dim(2);
    Tensor out = Tensor::empty({B, memory, C});
    for (int64_t b = 0; b < B; ++b) std::copy_n(t.f32() + (b * R + R - memory) * C, memory * C, out.f32() + b * memory * C);
    t = out;
  }
}

void SpanCache::check_rows(int64_t rows) const {
  if (!empty() && this->rows() != rows)
    fail_usage("adaptive_span: the cache holds " + std::to_string(this->rows()) + " streams, but this batch has " +
                   std::to_string(rows) + " rows",
               "the cache needs the same number of streams in every batch: use --task truncated_bptt_lm with a "
               "fixed --batch-size (and the same --batch-size-valid)");
}

NamedTensors SpanCache::save() const {
  NamedTensors out;
  if (empty()) return out;
  for (size_t l = 0; l < layers_.size(); ++l) out.emplace_back("span_cache." + std::to_string(l), layers_[l]);
  Tensor pos = Tensor::empty({1}, DType::I64);
  pos.i64()[0] = position_;
  out.emplace_back("span_cache.position", pos);
  return out;
}

void SpanCache::load(const NamedTensors& tensors) {
  std::vector<Tensor> layers(layers_.size());
  int64_t position = 0;
  bool have_position = false;
  for (const auto& [name, t] : tensors) {
    if (name == "span_cache.position") {
      STRETCH_CHECK(t.dtype() == DType::I64 && t.numel() == 1, "checkpoint: span_cache.position must be one I64");
      position = t.i64()[0];
      have_position = true;
      continue;
    }
    const std::string prefix = "span_cache.";
    STRETCH_CHECK(name.rfind(prefix, 0) == 0, "checkpoint: unexpected segment tensor '" << name << "'");
    const int64_t l = std::stoll(name.substr(prefix.size()));
    STRETCH_CHECK(l >= 0 && l < static_cast<int64_t>(layers.size()) && t.rank() == 3 && t.dtype() == DType::F32,
                  "checkpoint: segment tensor '" << name << "' " << t.shape().str() << " does not fit "
                                                 << layers.size() << " layers");
    layers[static_cast<size_t>(l)] = t.clone();
  }
  if (!have_position) return;  // no cache saved: start fresh
  for (size_t l = 0; l < layers.size(); ++l)
    STRETCH_CHECK(layers[l].defined() && layers[l].dim(0) == layers[0].dim(0),
                  "checkpoint: span_cache." << l << " is missing or has another batch size");
  layers_ = std::move(layers);
  position_ = position;
}

}  // namespace stretch::models
