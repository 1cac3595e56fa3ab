// nn/adaptive_softmax.h — fairseq's AdaptiveSoftmax (modules/adaptive_softmax.py) as an OutputHead
// with the adaptive_loss criterion (criterions/adaptive_loss.py); REFERENCE.md §2.5-2.6.
// Bands (nn/vocab_bands.h): the head scores band 0's c_0 words plus one logit per tail cluster
// ([N, c_0 + k − 1]: column c_0 + i − 1 is band i); tail i (band i ≥ 1) is proj (C → d_i), dropout,
// out (d_i → size_i), all without bias.
// Parameters (prefix "decoder.adaptive_softmax."), fairseq's names and order:
//   untied:  head.weight [c_0 + k − 1, C]; tail.{i−1}.0.weight [d_i, C], d_i = floor(C / factor^i);
//            tail.{i−1}.2.weight [size_i, d_i]
//   --tie-adaptive-weights (AdaptiveInput given): head.class_proj.weight [k − 1, C]; the word part
//            of the head is the input's band-0 table and tail out i the input's band-i table (not
//            registered again: fairseq stores them twice, as head.word_proj.weight and
//            tail.{i−1}.2.weight); without --tie-adaptive-proj tail.{i−1}.0.weight [d_i, C];
//   --tie-adaptive-proj: tail proj i is the input's band-i projection [C, d_i] used transposed
//            (fairseq's TiedLinear(transpose=True), stored again as tail.{i−1}.0.weight).
// loss(), Criterion::AdaptiveLoss (fairseq's adaptive_loss, quirks kept): in training, dropout p
// on the whole input first, then the head and each non-empty tail's rows, dropout p again after
// each tail projection; Σ over the head and tails of cross-entropy (sum) with ignore_index = pad
// applied to the head AND the tail-local targets (so band-local index pad, e.g. global 20001 and
// 60001 at wiki103, gets only its cluster term in training and validation). sample_size = ntokens
// = non-pad targets. With tied weights the head's softmax trains the pad row of band 0's table
// (the input side never does). Criterion::CrossEntropy is fairseq's cross_entropy over
// get_normalized_probs: exact NLL (no input dropout, no tail-local ignore; tail dropout in training).
// target_nll(): head and target-band tail rows only; log_scores(): full [N, V] log-probabilities.
// Training dropout masks: set_dropout_stream() (the model, per forward) gives seed and a base
// stream; the input uses base ^ 0 and tail i base ^ i.
#pragma once
#include <string>
#include <vector>

#include "nn/adaptive_input.h"
#include "nn/linear.h"
#include "nn/output_head.h"

namespace stretch::nn {

enum class AdaptiveCriterion : uint8_t { AdaptiveLoss, CrossEntropy };

struct AdaptiveSoftmaxConfig {
  int64_t vocab_size = 0;            // V
  int64_t input_dim = 0;             // C
  std::vector<int64_t> cutoff{};     // increasing, < V
  float dropout = 0.f;               // adaptive_softmax_dropout
  double factor = 4.0;               // adaptive_softmax_factor
  const AdaptiveInput* tied = nullptr;  // --tie-adaptive-weights: share the input's tables
  bool tie_proj = false;             // --tie-adaptive-proj (needs tied)
  AdaptiveCriterion criterion = AdaptiveCriterion::AdaptiveLoss;
};

class AdaptiveSoftmax final : public OutputHead {
 public:
  AdaptiveSoftmax(ParameterList& params, const std::string& prefix, const AdaptiveSoftmaxConfig& config);
  void init(Rng& rng);  // xavier_uniform for every weight this head registers, in registration order

  int64_t vocab_size() const override { return config_.vocab_size; }
  HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const override;
  void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets, float* nll,
                  int64_t chunk_rows = 0) const override;
  Tensor log_scores(const Tensor& hidden) const override;
  void set_dropout_stream(uint64_t seed, uint64_t stream) {
    seed_ = seed;
    stream_ = stream;
  }
  const VocabBands& bands() const { return bands_; }

 private:
  Var head_weight() const;                          // [c_0 + k − 1, C]
  Var tail(int64_t band, const Var& x, float p) const;  // x [n, C] -> logits [n, size_band]

  AdaptiveSoftmaxConfig config_{};
  VocabBands bands_{};
  Var head_, class_proj_;                 // untied head [c_0 + k − 1, C] | tied: class_proj [k − 1, C]
  std::vector<Linear> proj_{}, out_{};    // per tail (index band − 1): C → d (tied: InOut [C, d]), d → size
  std::vector<Var> own_{};                // the weights registered here, in order (init)
  uint64_t seed_ = 1, stream_ = 0;
};

}  // namespace stretch::nn
