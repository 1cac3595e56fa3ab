// data/batch_iterator.h — fairseq's LM batching: a fixed list of batches of token blocks,
// shuffled per epoch, sharded, resumable (REFERENCE.md §3.1).
// Contract:
//   * Block order (fairseq MonolingualDataset.ordered_indices under numpy_seed(seed)):
//     IndexOrder::Shuffled sorts blocks by length, ties by np.random.permutation(n) values
//     (np.lexsort([perm, sizes])); IndexOrder::Natural keeps 0..n-1.
//   * Blocks longer than max_positions are dropped from that order (or are an Error).
//   * batch_by_size (fairseq data_utils_fast.batch_by_size_fast): walk that order adding
//     blocks while rows × longest ≤ max_tokens and rows ≤ max_sentences (0 = no limit);
//     when full, emit the largest multiple of required_batch_size_multiple rows (or the
//     remainder if fewer) and carry the rest over. The list is fixed once.
//   * Each epoch e (1-based) visits the batches in np.random.shuffle order under seed + e
//     (EpochOrder::ShuffledPerEpoch) or in list order (EpochOrder::Fixed); shard s of S takes
//     positions s, s+S, … and is padded with empty batches to ceil(n/S) (ShardedIterator).
//   * State (epoch, position) is all there is: set_state() to a saved value gives exactly the
//     batches that would have followed. next() fills the next batch of the epoch and returns
//     false at its end; next_epoch() moves to epoch + 1, position 0.
//   * Collation: src/tgt [B, T] with T = the longest block in the batch, right-padded with
//     pad; src = the block's source, tgt = its target (token_blocks.h); ntokens = Σ lengths.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/batch.h"
#include "data/token_blocks.h"

namespace stretch::data {

struct BatchSizeParams {
  int64_t max_tokens = 0;                    // --max-tokens; 0 = no limit
  int64_t max_sentences = 0;                 // --batch-size / --max-sentences; 0 = no limit
  int64_t required_batch_size_multiple = 8;  // --required-batch-size-multiple
};

// fairseq's batch_by_size over `order` (indices into lengths). Error (naming --max-tokens)
// if a single item is longer than max_tokens, or if neither limit is set.
std::vector<std::vector<int64_t>> batch_by_size(const std::vector<int64_t>& order,
                                                const std::vector<int64_t>& lengths,  // [n] per index
                                                const BatchSizeParams& p);

enum class IndexOrder : uint8_t { Natural, Shuffled };
enum class EpochOrder : uint8_t { Fixed, ShuffledPerEpoch };
// Blocks longer than max_positions (only possible with break modes eos/complete): fairseq
// skips them in training and, with --skip-invalid-size-inputs-valid-test, in valid/test;
// otherwise it is an error.
enum class InvalidSizes : uint8_t { Skip, Error };

struct BatchIteratorParams {
  BatchSizeParams size;
  uint32_t seed = 1;                                  // --seed
  IndexOrder index_order = IndexOrder::Shuffled;      // fairseq LM task: shuffled (all splits)
  EpochOrder epoch_order = EpochOrder::ShuffledPerEpoch;  // training; Fixed for validation
  int64_t max_positions = 0;                          // longest block accepted; 0 = no limit
  InvalidSizes invalid_sizes = InvalidSizes::Skip;    // what to do with longer blocks
  int num_shards = 1;                                 // data-parallel world size
  int shard_id = 0;                                   // this rank
  int32_t pad = 1;
};

struct IteratorState {
  int64_t epoch = 1;     // 1-based, as fairseq
  int64_t position = 0;  // batches already consumed in this epoch (this shard)
  bool operator==(const IteratorState&) const = default;
};

class BatchIterator {
 public:
  BatchIterator(std::shared_ptr<const TokenBlocks> blocks, BatchIteratorParams p);

  int64_t batches_per_epoch() const;  // for this shard, empty fill batches included
  const std::vector<std::vector<int64_t>>& frozen_batches() const { return batches_; }  // all shards
  // The batches this shard visits in `epoch`, as indices into frozen_batches(); -1 = empty.
  // shuffle = false: the frozen order (fairseq's next_epoch_itr(shuffle=False), e.g. --curriculum).
  std::vector<int64_t> epoch_schedule(int64_t epoch, bool shuffle = true) const;

  IteratorState state() const { return state_; }
  void set_state(const IteratorState& s);
  bool next(Batch& out);
  void next_epoch();
  bool end_of_epoch() const { return state_.position >= batches_per_epoch(); }

  // Collate the given blocks into out (public for the evaluator and tests).
  void collate(const std::vector<int64_t>& block_ids, Batch& out) const;
  const TokenBlocks& blocks() const { return *blocks_; }

 private:
  std::shared_ptr<const TokenBlocks> blocks_;
  BatchIteratorParams p_;
  std::vector<std::vector<int64_t>> batches_;
  IteratorState state_;
  std::vector<int64_t> schedule_;  // epoch_schedule(state_.epoch), cached
  int64_t schedule_epoch_ = -1;
};

}  // namespace stretch::data
