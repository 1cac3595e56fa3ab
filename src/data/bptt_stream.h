// data/bptt_stream.h — B parallel contiguous streams walked block by block, for models that
// carry memory across blocks (Transformer-XL, Adaptive Span). REFERENCE.md §6.5.
// Contract, with B = batch_size rows per shard, G = B × num_shards, T = tokens_per_sample:
//   BpttTargets::WithinBlock — fairseq examples/truncated_bptt (TruncatedBPTTDataset): the
//     stream is cut into blocks of T (the last may be shorter); block ids 0..n-1 are trimmed
//     to a multiple of G and laid out as [G, n/G] row-major, so global row r holds blocks
//     r·(n/G) … (r+1)·(n/G) − 1, a contiguous stretch of the corpus; shard s takes rows
//     [s·B, (s+1)·B). Step i gives column i: src = the blocks [B, T] (right-padded),
//     tgt = src shifted left by one with pad appended (the last position of every block is
//     not scored). num_steps() = n/G.
//   BpttTargets::AcrossBlocks — Transformer-XL's LMOrderedIterator: the token stream is
//     trimmed to a multiple of G and laid out as [G, n_step]; step i covers columns
//     [iT, iT + s) with s = min(T, n_step − 1 − iT), and tgt is the next token of the same
//     row, so targets cross block boundaries and only each row's first token is never a
//     target. num_steps() = ceil((n_step − 1) / T).
//   Steps are random access (step(i)) and in order across a pass; nothing is shuffled.
//   As in every Batch, offsets[r] is the stream offset of row r's first target (its first src
//   token is one before it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/indexed_dataset.h"

namespace stretch::data {

enum class BpttTargets : uint8_t { WithinBlock, AcrossBlocks };

struct BpttParams {
  int64_t batch_size = 8;          // B: rows (streams) per shard
  int64_t tokens_per_sample = 512; // T
  BpttTargets targets = BpttTargets::WithinBlock;
  int num_shards = 1;
  int shard_id = 0;
  int32_t pad = 1;
  std::string source = "data";     // the split's file, for errors
};

class BpttStreams {
 public:
  BpttStreams(std::shared_ptr<const TokenStream> stream, BpttParams p);
  int64_t num_steps() const { return num_steps_; }
  void step(int64_t i, Batch& out) const;
  int64_t row_length() const { return row_len_; }  // tokens (AcrossBlocks) or blocks (WithinBlock) per row

 private:
  std::shared_ptr<const TokenStream> stream_;
  BpttParams p_;
  int64_t num_steps_ = 0;
  int64_t row_len_ = 0;
};

}  // namespace stretch::data
