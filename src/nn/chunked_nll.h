// nn/chunked_nll.h — OutputHead::target_nll for heads whose scores are full logits [m, V]: the
// scored rows gathered in chunks of chunk_rows (0: as many as kScoreChunkBytes of logits allow),
// logits(h) per chunk, nll = logsumexp − logit[target] (ops::cross_entropy_forward). Shared by the
// full softmax head and the RoBERTa LM head (models/roberta/lm_head.cpp).
// banded_target_nll: the same for an adaptive softmax over vocabulary bands (fairseq's
// AdaptiveSoftmax, HF's ProjectedAdaptiveLogSoftmax): per chunk of rows (sized by the head's width
// c_0 + k − 1) the head's NLL of each row's head target (the word below c_0, else its band's
// cluster c_0 + band − 1), then per band the rows whose target lies there, in sub-chunks sized by
// the band's width, plus the band-local NLL — never an [m, V] matrix.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "autograd/var.h"
#include "nn/vocab_bands.h"
#include "tensor/tensor.h"

namespace stretch::nn {

// Logits of columns [first, first + count) only: (h [m, C], first, count) → [m, count].
using BlockLogits = std::function<Tensor(const Tensor&, int64_t first, int64_t count)>;

// With block_logits, vocabularies wider than kScoreBlockColumns are projected and scored a column
// block at a time: each [m, kScoreBlockColumns] block is scored while it is in cache
// (ops::lse_accumulate), and since only one block of logits is in flight, a chunk takes
// kScoreChunkBytes / (4 · kScoreBlockColumns) = 2,048 rows instead of kScoreChunkBytes / (4 · V)
// (31 at V 267,744): the weight is read (and under bf16 rounded) once per 2,048 rows, not once per
// 31. The same NLL bit for bit; eval-lm 1.07x at V 33,280 and 2.1x (fp32) / 2.6x (bf16) at
// V 267,744 on Zen 4 (docs/BENCHMARKS.md, session 38).
inline constexpr int64_t kScoreBlockColumns = 4096;  // a multiple of ops::kLseColumnAlign
void chunked_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                        float* nll, int64_t chunk_rows, int64_t vocab_size,
                        const std::function<Tensor(const Tensor&)>& logits,  // [m, C] → [m, V]
                        const BlockLogits& block_logits = {});

void banded_target_nll(const Tensor& hidden, std::span<const int64_t> rows, std::span<const int32_t> targets,
                       float* nll, int64_t chunk_rows, const VocabBands& bands, int64_t vocab_size,
                       const std::function<autograd::Var(const autograd::Var&)>& head_logits,               // [m, C] → [m, c_0 + k − 1]
                       const std::function<autograd::Var(int64_t band, const autograd::Var&)>& band_logits);  // [m, C] → [m, size_b]

}  // namespace stretch::nn
