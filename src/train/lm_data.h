// train/lm_data.h — what the trainer and evaluator need from the data layer: a dictionary and,
// per split, the batches of one epoch in a resumable order.
// Contract: src/tgt are [B, T] I32, right-padded with pad (1); tgt is the block, src the block
// shifted right with eos first (REFERENCE.md §4.3); ntokens counts non-pad targets.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/token_blocks.h"
#include "tensor/tensor.h"

namespace stretch::data {
class TokenStream;
}

namespace stretch::train {

struct LmBatch {
  Tensor src;  // [B, T] I32
  Tensor tgt;  // [B, T] I32
  int64_t ntokens = 0;
};

struct LmSplitOptions {
  int64_t tokens_per_sample = 512;
  data::BreakMode sample_break_mode = data::BreakMode::None;
  int64_t max_tokens = 0;
  int64_t batch_size = 0;
  int64_t required_batch_size_multiple = 8;
  uint64_t seed = 1;
  bool shuffle = true;
  int shard_rank = 0, shard_count = 1;  // data parallelism: this process's share of each epoch's batches
};

class LmSplit {
 public:
  virtual ~LmSplit() = default;
  virtual void set_epoch(int64_t epoch) = 0;       // 1-based; reshuffles the batch order (seed + epoch)
  virtual int64_t num_batches() const = 0;         // in this epoch, for this shard
  virtual LmBatch batch(int64_t index) const = 0;  // index-th batch of the epoch
  virtual int64_t num_tokens() const = 0;          // tokens in the split
};

struct LmData {
  int64_t vocab_size = 0;
  int32_t pad = 1, eos = 2;
  std::string dict_hash;
  std::string dict_path;
  bool byte_level = false;  // every symbol is a byte value: loss per token = bits per byte
};

// Opens DATA/dict.txt; errors name the file and line.
LmData open_lm_data(const std::string& data_dir);
// The concatenated token stream of DATA/<split>.{bin,idx}, ids checked < vocab_size.
std::shared_ptr<const data::TokenStream> open_split_stream(const std::string& data_dir, const std::string& split,
                                                           const LmData& data);
// Opens DATA/<split>.{bin,idx}; checks every id < vocab_size; errors name the file.
std::unique_ptr<LmSplit> open_lm_split(const std::string& data_dir, const std::string& split, const LmData& data,
                                       const LmSplitOptions& options);

}  // namespace stretch::train
