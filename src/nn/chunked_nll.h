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

// With block_logits and bf16 products (ops::matmul_precision()), vocabularies wider than
// kScoreBlockColumns are projected and scored a column block at a time: each [m, kScoreBlockColumns]
// block's GEMM rounds only its own rows of the weight, and the block is scored while it is in cache
// (ops::lse_accumulate), where the whole chunk's GEMM rounded all of [V, C] through memory for every
// chunk of rows. The same NLL bit for bit; a bf16 evaluation pass 4-10% faster on Zen 4, an fp32 one
// no faster (0.97x), so fp32 keeps the whole chunk (docs/BENCHMARKS.md, session 38).
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
