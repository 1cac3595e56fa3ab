// nn/adaptive_input.h — fairseq's AdaptiveInput (modules/adaptive_input.py; REFERENCE.md §2.4):
// the vocabulary in bands (nn/vocab_bands.h), band i an embedding table [size_i, d_i] with
// d_i = floor(initial_dim / factor^i) followed by a projection d_i → output_dim without bias.
// Parameter names (prefix "decoder.embed_tokens."): embeddings.{i}.0.weight [size_i, d_i] and
// embeddings.{i}.1.weight [output_dim, d_i], in that order per band (fairseq's state dict).
// Quirks kept from fairseq: only band 0's table has padding_idx (its pad row gets no gradient
// from the input side); init() zeroes row padding_idx of EVERY band's table (fairseq's init
// closure captures padding_idx), which bands > 0 then train like any row.
// hf_names: HuggingFace TransfoXL's AdaptiveEmbedding (div_val > 1) instead: emb_layers.{i}.weight
// for every band, then emb_projs.{i} ([output_dim, d_i], the same layout), d_i = d // div_val^i
// (factor = div_val), no padding row (padding_idx −1); HF scales after the projection, which is
// the same linear map.
// forward(ids [B, T], scale) -> [B, T, output_dim] = scale · proj_i(table_i[id − start_i]) for
// each token's band (the scale is applied to the embedding row, before the linear projection).
#pragma once
#include <string>
#include <vector>

#include "nn/parameters.h"
#include "nn/vocab_bands.h"

namespace stretch::nn {

struct AdaptiveInputConfig {
  int64_t vocab_size = 0;              // V
  int32_t padding_idx = 1;
  int64_t initial_dim = 0;             // d_0 (fairseq: decoder_input_dim)
  double factor = 4.0;                 // d_i = floor(initial_dim / factor^i)
  int64_t output_dim = 0;              // C (decoder_embed_dim)
  std::vector<int64_t> cutoff{};       // increasing, < V (V is appended)
  bool hf_names = false;               // TransfoXL's parameter names and order (see above)
};

class AdaptiveInput {
 public:
  AdaptiveInput() = default;
  AdaptiveInput(ParameterList& params, const std::string& prefix, const AdaptiveInputConfig& config);
  void init(Rng& rng);  // fairseq's order: per band, N(0, d_i^-1/2) with the pad row zeroed, then xavier
  Var operator()(const Tensor& ids, float scale) const;  // [B, T] -> [B, T, C]

  const VocabBands& bands() const { return bands_; }
  int64_t band_dim(int64_t i) const { return tables_[static_cast<size_t>(i)].shape()[1]; }
  // fairseq's weights_for_band(i): the table [size_i, d_i] and the projection [C, d_i].
  const Var& table(int64_t i) const { return tables_[static_cast<size_t>(i)]; }
  const Var& projection(int64_t i) const { return projections_[static_cast<size_t>(i)]; }

 private:
  AdaptiveInputConfig config_{};
  VocabBands bands_{};
  std::vector<Var> tables_{}, projections_{};
};

}  // namespace stretch::nn
