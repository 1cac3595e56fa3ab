// nn/adaptive_input.cpp — see adaptive_input.h.
#include "nn/adaptive_input.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"

namespace stretch::nn {

AdaptiveInput::AdaptiveInput(ParameterList& params, const std::string& prefix, const AdaptiveInputConfig& config)
    : config_(config), bands_(VocabBands::make(config.cutoff, config.vocab_size)) {
  for (int64_t i = 0; i < bands_.count(); ++i) {
    const int64_t d = VocabBands::dim(config.initial_dim, config.factor, i);
    const std::string p = prefix + (config.hf_names ? "emb_layers." : "embeddings.") + std::to_string(i) + ".";
    tables_.push_back(params.add(p + (config.hf_names ? "weight" : "0.weight"), {bands_.size(i), d}));
    if (!config.hf_names) projections_.push_back(params.add(p + "1.weight", {config.output_dim, d}));
  }
  for (int64_t i = 0; config.hf_names && i < bands_.count(); ++i)  // HF: every table, then every projection
    projections_.push_back(params.add(prefix + "emb_projs." + std::to_string(i), {config.output_dim, band_dim(i)}));
}

void AdaptiveInput::init(Rng& rng) {
  for (size_t i = 0; i < tables_.size(); ++i) {
    Var& t = tables_[i];
    const int64_t rows = t.shape()[0], d = t.shape()[1];
    init_normal(t, 0.f, 1.0f / std::sqrt(static_cast<float>(d)), rng);
    if (config_.padding_idx >= 0 && config_.padding_idx < rows)  // every band (fairseq's quirk)
      std::fill_n(t.data() + config_.padding_idx * d, d, 0.f);
    init_xavier_uniform(projections_[i], 1.0f, rng);
  }
}

Var AdaptiveInput::operator()(const Tensor& ids, float scale) const {
  const int64_t n = ids.numel(), C = config_.output_dim;
  const BandRoute r = route(bands_, ids.i32(), n);
  std::vector<autograd::RowPart> parts;
  for (int64_t b = 0; b < bands_.count(); ++b) {
    const Tensor& rows = r.rows[static_cast<size_t>(b)];
    if (rows.numel() == 0) continue;
    const auto i = static_cast<size_t>(b);
    Var e = autograd::embedding(r.local[i], tables_[i], scale, b == 0 ? config_.padding_idx : -1);  // [n_b, d_b]
    parts.push_back({autograd::linear(e, projections_[i], Var()), rows});                           // [n_b, C]
  }
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(C);
  return autograd::scatter_rows(parts, Shape(dims));  // [B, T, C]
}

}  // namespace stretch::nn
