// nn/output_head.h — what turns a family's hidden states into a distribution over the
// vocabulary, and owns the loss (fairseq's output layer + criterion in one object).
// Contract, for hidden states of the head's dimension C and a vocabulary of V:
//   loss(hidden [B, T, C], targets [B, T], pad, use) -> the training/validation loss: a scalar
//     Var (recorded on the tape when grad is on), its sample_size (what the summed gradients
//     are divided by: fairseq's cross_entropy and adaptive_loss count non-pad targets) and the
//     number of non-pad targets scored. LossUse::Training may consume internal buffers (the full
//     softmax turns its logits into their gradient in place); Validation keeps them.
//   target_nll(hidden [R, C], rows, targets, nll) -> nll[i] = −log p(targets[i] | hidden[rows[i]])
//     in nats, for any set of rows, without a gradient, chunked inside (never [R, V] at once).
//   log_scores(hidden [N, C]) -> [N, V] unnormalised log-probabilities (softmax of a row is the
//     model's distribution), for sampling.
// Implementations: nn/softmax_head.h (full softmax), nn/adaptive_softmax.h (adaptive softmax).
#pragma once
#include <cstdint>
#include <span>

#include "autograd/var.h"

namespace stretch::nn {

using autograd::Var;

enum class LossUse : uint8_t { Training, Validation };

struct HeadLoss {
  Var loss;                 // [1], Σ over the scored targets (nats) unless the criterion says otherwise
  double sample_size = 0;   // the gradient's divisor for this batch
  int64_t ntokens = 0;      // non-pad targets scored
};

// Logits computed at once while scoring rows: 32 MiB.
inline constexpr int64_t kScoreChunkBytes = 32ll << 20;

class OutputHead {
 public:
  virtual ~OutputHead() = default;
  virtual int64_t vocab_size() const = 0;
  virtual HeadLoss loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const = 0;
  // chunk_rows: rows per chunk (0: as many as kScoreChunkBytes of logits allow).
  virtual void target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                          float* nll, int64_t chunk_rows = 0) const = 0;
  virtual Tensor log_scores(const Tensor& hidden) const = 0;
};

}  // namespace stretch::nn
