// nn/projected_adaptive_softmax.h — HuggingFace's ProjectedAdaptiveLogSoftmax (TransfoXL's
// output layer, which fairseq's transformer_xl wraps; REFERENCE.md §6.4, §6.6) as an OutputHead
// with fairseq's cross_entropy over its log-probabilities (exact NLL, no dropout).
// Bands (nn/vocab_bands.h) [start_i, end_i); k bands, so k − 1 clusters. Per band i a weight
// W_i [size_i, d_i] with a bias b_i [size_i] and an optional projection P_i [C, d_i]:
//   logits_i(x [n, C]) = (P_i ? x · P_i : x) · W_iᵀ + b_i
// The head (band 0) appends the clusters: W_0' = [W_0; cluster_weight [k−1, d_0]],
// b_0' = [b_0; cluster_bias [k−1]], so head column c_0 + i − 1 is cluster i (HF's order, not the
// original code's reversed one). log p(w) = head_lp[w] for w < c_0, else
// head_lp[c_0 + band − 1] + log_softmax(logits_band)[w − start_band].
// Layouts (HF, with fairseq's d_embed = d_model = C):
//   div_val 1: one weight [V, C] and one bias [V] (out_layers.0, the weight tied to the word
//     embedding); band i reads rows [start_i, end_i) of both (autograd::slice_rows); no projections.
//   div_val > 1: per band out_layers.i.{weight [size_i, d_i] (tied to word_emb.emb_layers.i),
//     bias [size_i]} and out_projs.i [C, d_i] (i ≥ 1 tied to word_emb.emb_projs.i: tie_projs =
//     [False, True, ...]; out_projs.0 is the head's own).
// The model builds the Vars (names, tying) and hands them over; this class registers nothing.
// loss(): Σ NLL over non-pad targets, sample_size = ntokens = non-pad targets (fairseq's
// cross_entropy over get_normalized_probs). target_nll(): the head and each target's band only.
// log_scores(): full [N, V] log-probabilities.
#pragma once
#include <vector>

#include "nn/output_head.h"
#include "nn/vocab_bands.h"

namespace stretch::nn {

struct ProjectedAdaptiveSoftmaxWeights {
  int64_t vocab_size = 0;            // V
  int64_t input_dim = 0;             // C (HF's d_proj)
  VocabBands bands{};                // k bands
  Var full_weight{}, full_bias{};    // div_val 1: [V, C], [V] (band weights are row slices)
  std::vector<Var> weight{}, bias{}; // div_val > 1: per band [size_i, d_i], [size_i]
  std::vector<Var> proj{};           // per band [C, d_i] or undefined (none); empty: none at all
  Var cluster_weight{}, cluster_bias{};  // [k − 1, d_0], [k − 1] (k > 1)
};

class ProjectedAdaptiveSoftmax final : public OutputHead {
 public:
  explicit ProjectedAdaptiveSoftmax(ProjectedAdaptiveSoftmaxWeights w);
  int64_t vocab_size() const override { return w_.vocab_size; }
  HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const override;
  void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets, float* nll,
                  int64_t chunk_rows = 0) const override;
  Tensor log_scores(const Tensor& hidden) const override;
  const VocabBands& bands() const { return w_.bands; }

 private:
  // x [n, C] -> logits [n, size_band] (band 0: [n, c_0 + k − 1], clusters last)
  Var logits(int64_t band, const Var& x) const;
  int32_t head_target(int32_t word) const;  // w < c_0: w, else c_0 + band − 1

  ProjectedAdaptiveSoftmaxWeights w_;
};

}  // namespace stretch::nn
