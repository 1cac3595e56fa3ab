// nn/softmax_head.cpp — see softmax_head.h.
#include "nn/softmax_head.h"

#include <algorithm>

#include "autograd/functions.h"
#include "nn/chunked_nll.h"
#include "core/error.h"
#include "ops/cross_entropy.h"

namespace stretch::nn {

Var SoftmaxHead::logits(const Var& hidden) const { return autograd::linear(hidden, weight_, bias_); }

HeadLoss SoftmaxHead::loss(const Var& hidden, const Tensor& targets, int32_t pad, LossUse use) const {
  HeadLoss out;
  out.loss = autograd::cross_entropy(logits(hidden), targets, pad, ops::Reduction::Sum, &out.ntokens,
                                     use == LossUse::Training ? autograd::LogitsBuffer::ReuseForGradient
                                                              : autograd::LogitsBuffer::Keep);
  out.sample_size = static_cast<double>(out.ntokens);
  return out;
}

void SoftmaxHead::target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                             float* nll, int64_t chunk_rows) const {
  chunked_target_nll(
      hidden, rows, targets, nll, chunk_rows, vocab_size(), [this](const Tensor& h) { return logits(Var(h)).value(); },
      [this](const Tensor& h, int64_t first, int64_t count) {
        return autograd::linear_rows(Var(h), weight_, first, count, bias_).value();
      });
}

Tensor SoftmaxHead::log_scores(const Tensor& hidden) const { return logits(Var(hidden)).value(); }

}  // namespace stretch::nn
