// models/roberta/lm_head.cpp — see lm_head.h.
#include "models/roberta/lm_head.h"

#include <algorithm>

#include "autograd/functions.h"
#include "core/error.h"
#include "nn/chunked_nll.h"
#include "ops/cross_entropy.h"

namespace stretch::models {

using namespace autograd;

RobertaLmHead::RobertaLmHead(nn::ParameterList& params, const std::string& prefix, Var weight,
                             ops::Activation activation)
    : weight_(std::move(weight)), activation_(activation) {
  // fairseq's named_parameters order: the head's own (weight: tied, bias), then dense, layer_norm.
  bias = params.add(prefix + "bias", {weight_.shape()[0]});
  dense = nn::Linear::make(params, prefix + "dense.", weight_.shape()[1], weight_.shape()[1]);
  layer_norm = nn::LayerNorm::make(params, prefix + "layer_norm.", weight_.shape()[1]);
}

Var RobertaLmHead::logits(const Var& hidden) const {
  Var x = activation(dense(hidden), activation_);  // [.., C]
  x = layer_norm(x);
  return linear(x, weight_, bias);  // [.., V]
}

nn::HeadLoss RobertaLmHead::loss(const Var& hidden, const Tensor& targets, int32_t pad, nn::LossUse use) const {
  STRETCH_CHECK(hidden.numel() == targets.numel() * hidden.shape()[-1],
                "masked_lm loss: hidden " << hidden.shape().str() << " and targets " << targets.shape().str());
  // The masked positions: fairseq's masked_tokens = target.ne(pad); the head runs on them only.
  std::vector<int64_t> rows;
  const int32_t* t = targets.i32();
  for (int64_t i = 0; i < targets.numel(); ++i)
    if (t[i] != pad) rows.push_back(i);
  // A batch without a masked token (fairseq scores none): one row with a pad target, loss 0.
  const bool none = rows.empty();
  if (none) rows.push_back(0);
  Tensor r = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::I64);  // [n]
  Tensor tgt = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::I32);
  for (size_t i = 0; i < rows.size(); ++i) {
    r.i64()[i] = rows[i];
    tgt.i32()[i] = none ? pad : t[rows[i]];
  }
  nn::HeadLoss out;
  out.loss = cross_entropy(logits(gather_rows(hidden, r)), tgt, pad, ops::Reduction::Sum, &out.ntokens,
                           use == nn::LossUse::Training ? LogitsBuffer::ReuseForGradient : LogitsBuffer::Keep);
  out.sample_size = static_cast<double>(out.ntokens);
  return out;
}

void RobertaLmHead::target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                               float* nll, int64_t chunk_rows) const {
  nn::chunked_target_nll(hidden, rows, targets, nll, chunk_rows, vocab_size(),
                         [this](const Tensor& h) { return logits(Var(h)).value(); });
}

Tensor RobertaLmHead::log_scores(const Tensor& hidden) const { return logits(Var(hidden)).value(); }

}  // namespace stretch::models
