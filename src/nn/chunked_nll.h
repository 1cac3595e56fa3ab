// nn/chunked_nll.h — OutputHead::target_nll for heads whose scores are full logits [m, V]: the
// scored rows gathered in chunks of chunk_rows (0: as many as kScoreChunkBytes of logits allow),
// logits(h) per chunk, nll = logsumexp − logit[target] (ops::cross_entropy_forward). Shared by the
// full softmax head and the RoBERTa LM head (models/roberta/lm_head.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "tensor/tensor.h"

namespace stretch::nn {

void chunked_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                        float* nll, int64_t chunk_rows, int64_t vocab_size,
                        const std::function<Tensor(const Tensor&)>& logits);  // [m, C] → [m, V]

}  // namespace stretch::nn
