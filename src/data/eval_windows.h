// data/eval_windows.h — fairseq-eval-lm's evaluation windows (REFERENCE.md §4.4).
// Contract, for model length L = tokens_per_sample and context c = context_window
// (0 <= c < L; --stride S is the same as c = L − S):
//   * Blocks are TokenBlocks of L − c tokens in natural order (break mode as given).
//   * A running buffer prev of earlier source tokens starts empty. For each block in order
//     (LMContextWindowDataset.collater): trim prev from the left so len(prev) + len(block)
//     <= L; the input row is prev ‖ block source ‖ pads, the target row is pad except
//     positions [len(prev), len(prev) + len(block)) which hold the block's targets,
//     start = len(prev); then prev = the last c non-pad tokens of the input row.
//     So every scored token after the first c has at least c tokens of context, and each
//     token of the split is scored exactly once (the first one from the initial </s>).
//   * c = 0 gives the plain blocks (input = source, target = target, start 0).
//   * add_bos_token (fairseq's --add-bos-token: MonolingualDataset._maybe_add_bos, then
//     eval_lm's remove_bos_token): each block's source and target get <s> in front, so the
//     row is prev ‖ <s> ‖ block source, trimmed so len(prev) + 1 + len(block) <= L (a full
//     block keeps c − 1 tokens of context; c = 0 rows are L + 1 long); the <s> target is
//     not scored (pad here, start = len(prev) + 1), and prev, the last c non-pad input
//     tokens, may hold an earlier <s>. Block lengths, batches and counts are unchanged.
//   * Windows are batched in order by batch_by_size on block lengths (fairseq: max_tokens
//     counts the new tokens, not the context); all rows of a batch have width
//     (longest block in the batch) + c, right-padded. The windows do not depend on the
//     batching. Test vectors (L = 4, stream 10..19): see tests/data/test_eval_windows.cpp.
//   * max_positions > 0 (the eos and complete break modes): blocks longer than it are skipped,
//     as fairseq-eval-lm's batch iterator does (filter_indices_by_size, ignore_invalid_inputs):
//     after fairseq's order is set, before batching and sharding; a skipped block is neither
//     scored nor context for the next one. skipped() lists them (block indices, in fairseq's order).
//   * Shards (--num-shards S --shard-id s, fairseq's ShardedIterator): fairseq's batches are
//     batch_by_size(shard_size) over fairseq's order (c = 0: MonolingualDataset's
//     np.lexsort([np.random.permutation(n) under seed 1, lengths]); c > 0: natural), and shard s keeps batches s, s+S, ... Only
//     those blocks are windows here, in that order, and prev carries over from the shard's
//     previous block, as LMContextWindowDataset's prev_tokens does in fairseq.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/batch.h"
#include "data/batch_iterator.h"
#include "data/token_blocks.h"

namespace stretch::data {

struct EvalWindowParams {
  int64_t tokens_per_sample = 512;  // L: the longest input row the model sees
  int64_t context_window = 0;       // c: tokens of context kept before each block
  BreakMode break_mode = BreakMode::None;
  BatchSizeParams size{.max_tokens = 0, .max_sentences = 1, .required_batch_size_multiple = 1};
  int32_t pad = 1;
  int32_t eos = 2;
  bool add_bos_token = false;       // fairseq's --add-bos-token: <s> before each block, its score dropped
  int32_t bos = 0;
  int64_t max_positions = 0;        // skip blocks longer than this (0: keep every block)
  int64_t num_shards = 1;           // --num-shards
  int64_t shard_id = 0;             // --shard-id, in [0, num_shards)
  BatchSizeParams shard_size{.max_tokens = 36000, .max_sentences = 0, .required_batch_size_multiple = 1};  // fairseq's batches

  // The --stride S form: c = L − S (1 <= S <= L).
  static EvalWindowParams from_stride(int64_t tokens_per_sample, int64_t stride);
};

class EvalWindows {
 public:
  EvalWindows(std::shared_ptr<const TokenStream> stream, EvalWindowParams p);

  int64_t num_windows() const { return blocks_->size(); }
  int64_t num_batches() const { return static_cast<int64_t>(batches_.size()); }
  int64_t scored_tokens() const { return scored_tokens_; }  // targets of the (shard's) blocks
  // The blocks evaluated, in the order fairseq-eval-lm prints its samples.
  const std::vector<int64_t>& fairseq_order() const { return fairseq_order_; }
  // Blocks left out for max_positions, in fairseq's order (fairseq's warning lists the first few).
  const std::vector<int64_t>& skipped() const { return skipped_; }
  // Fill the next batch of windows in order; false when all windows were given.
  bool next(Batch& out);
  void reset();  // back to the first window (prev emptied)
  const TokenBlocks& blocks() const { return *blocks_; }

 private:
  EvalWindowParams p_;
  std::shared_ptr<const TokenBlocks> blocks_;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<int64_t> fairseq_order_;
  std::vector<int64_t> skipped_;
  int64_t scored_tokens_ = 0;
  int64_t next_batch_ = 0;
  std::vector<int32_t> prev_;
  std::vector<int32_t> row_;  // scratch
};

}  // namespace stretch::data
