// data/batch.h — one batch of token rows, the unit every data iterator hands to a model.
// Contract: src and tgt are int32 tensors of the same shape [B, T], right-padded with
// pad = 1. tgt holds pad wherever nothing is scored (padding, the context part of an
// evaluation window, the last position of a truncated-BPTT block), so a loss that ignores
// pad targets scores exactly the intended tokens. ntokens counts the non-pad targets (the
// number the loss is normalised by in fairseq's LM task). Per-row vectors have B entries.
// A batch with B = 0 (an empty fill batch of a shard, as fairseq's ShardedIterator gives)
// has empty tensors and ntokens = 0.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace stretch::data {

struct Batch {
  Tensor src;                     // [B, T] int32: model input, right-padded with pad
  Tensor tgt;                     // [B, T] int32: next-token targets, pad where not scored
  std::vector<int64_t> ids;       // [B] block (or window / stream) index of each row
  std::vector<int64_t> offsets;   // [B] stream offset (in tokens) of each row's first target
  std::vector<int32_t> lengths;   // [B] non-pad input tokens of each row (src_lengths)
  std::vector<int32_t> starts;    // [B] first scored position of each row (windows; else 0)
  int64_t ntokens = 0;            // non-pad targets in the batch

  int64_t rows() const { return src.defined() ? src.dim(0) : 0; }
  int64_t width() const { return src.defined() ? src.dim(1) : 0; }
  bool empty() const { return rows() == 0; }
  // Allocate [rows, width] src/tgt filled with pad and size the per-row vectors.
  void reset(int64_t rows, int64_t width, int32_t pad);
};

// fairseq's --add-bos-token in training (MonolingualDataset._maybe_add_bos, then collate): `bos`
// (<s> = 0) before every row's source AND target, so [B, T] becomes [B, T + 1], each row's length
// and ntokens grow by one (the <s> target is scored, as fairseq scores it), offsets stay those of
// the block's first token. An empty batch stays empty.
void prepend_bos(Batch& batch, int32_t bos);

}  // namespace stretch::data
