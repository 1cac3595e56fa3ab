// data/batch_iterator.cpp — see batch_iterator.h.
#include "data/batch_iterator.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "data/numpy_random.h"

namespace stretch::data {

std::vector<std::vector<int64_t>> batch_by_size(const std::vector<int64_t>& order, const std::vector<int64_t>& lengths,
                                                const BatchSizeParams& p) {
  if (p.max_tokens <= 0 && p.max_sentences <= 0)
    fail_usage("no batch size given", "pass --max-tokens N (tokens per batch) and/or --batch-size N (rows per batch)");
  const int64_t mult = std::max<int64_t>(1, p.required_batch_size_multiple);
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> batch, batch_lens;
  int64_t longest = 0;
  for (int64_t idx : order) {
    const int64_t len = lengths[static_cast<size_t>(idx)];
    batch_lens.push_back(len);
    longest = std::max(longest, len);
    if (p.max_tokens > 0 && longest > p.max_tokens)
      fail_usage("--max-tokens " + std::to_string(p.max_tokens) + " is smaller than sample " + std::to_string(idx) +
                     " of " + std::to_string(len) + " tokens",
                 "raise --max-tokens to at least --tokens-per-sample, or lower --tokens-per-sample");
    const auto rows = static_cast<int64_t>(batch.size());
    const bool full = rows > 0 && ((p.max_sentences > 0 && rows == p.max_sentences) ||
                                   (p.max_tokens > 0 && (rows + 1) * longest > p.max_tokens));
    if (full) {
      const int64_t keep = std::max(mult * (rows / mult), rows % mult);
      batches.emplace_back(batch.begin(), batch.begin() + keep);
      batch.erase(batch.begin(), batch.begin() + keep);
      batch_lens.erase(batch_lens.begin(), batch_lens.begin() + keep);
      longest = batch_lens.empty() ? 0 : *std::max_element(batch_lens.begin(), batch_lens.end());
    }
    batch.push_back(idx);
  }
  if (!batch.empty()) batches.push_back(std::move(batch));
  return batches;
}

BatchIterator::BatchIterator(std::shared_ptr<const TokenBlocks> blocks, BatchIteratorParams p)
    : blocks_(std::move(blocks)), p_(p) {
  STRETCH_CHECK(blocks_, "BatchIterator needs blocks");
  if (p_.num_shards < 1 || p_.shard_id < 0 || p_.shard_id >= p_.num_shards)
    fail_usage("shard " + std::to_string(p_.shard_id) + " of " + std::to_string(p_.num_shards) + " does not exist");
  const int64_t n = blocks_->size();
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) lengths[static_cast<size_t>(k)] = blocks_->block_length(k);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (p_.index_order == IndexOrder::Shuffled) {
    NumpyRandomState rs(p_.seed);
    const std::vector<int64_t> perm = rs.permutation(n);
    // np.lexsort([perm, sizes]): by size, then by the permutation's value at each index.
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
      return lengths[ua] != lengths[ub] ? lengths[ua] < lengths[ub] : perm[ua] < perm[ub];
    });
  }
  if (p_.max_positions > 0) {
    std::vector<int64_t> kept, skipped;
    for (int64_t k : order) (lengths[static_cast<size_t>(k)] > p_.max_positions ? skipped : kept).push_back(k);
    if (!skipped.empty()) {
      const int64_t k = skipped.front();
      const std::string what = std::to_string(skipped.size()) + " sample(s) longer than max_positions " +
                               std::to_string(p_.max_positions) + " (the first: sample " + std::to_string(k) +
                               " of " + std::to_string(lengths[static_cast<size_t>(k)]) + " tokens)";
      if (p_.invalid_sizes == InvalidSizes::Error)
        fail_input("data", what, "pass --skip-invalid-size-inputs-valid-test to skip them, or use --sample-break-mode none");
      log_warning(what + " will be skipped");
    }
    order = std::move(kept);
  }
  batches_ = batch_by_size(order, lengths, p_.size);
}

int64_t BatchIterator::batches_per_epoch() const {
  const auto n = static_cast<int64_t>(batches_.size());
  return (n + p_.num_shards - 1) / p_.num_shards;
}

std::vector<int64_t> BatchIterator::epoch_schedule(int64_t epoch, bool shuffle) const {
  std::vector<int64_t> all(batches_.size());
  std::iota(all.begin(), all.end(), 0);
  if (p_.epoch_order == EpochOrder::ShuffledPerEpoch && shuffle) {
    NumpyRandomState rs(static_cast<uint32_t>(p_.seed + static_cast<uint64_t>(epoch)));
    rs.shuffle(all);
  }
  std::vector<int64_t> mine;
  const int64_t per = batches_per_epoch();
  for (int64_t i = 0; i < per; ++i) {
    const int64_t at = i * p_.num_shards + p_.shard_id;
    mine.push_back(at < static_cast<int64_t>(all.size()) ? all[static_cast<size_t>(at)] : -1);
  }
  return mine;
}

void BatchIterator::set_state(const IteratorState& s) {
  if (s.epoch < 1 || s.position < 0 || s.position > batches_per_epoch())
    fail_input("data position", "epoch " + std::to_string(s.epoch) + ", batch " + std::to_string(s.position) +
                                    " does not exist (" + std::to_string(batches_per_epoch()) + " batches per epoch)",
               "the checkpoint was saved with different data or batching flags");
  state_ = s;
}

bool BatchIterator::next(Batch& out) {
  if (end_of_epoch()) return false;
  if (schedule_epoch_ != state_.epoch) {
    schedule_ = epoch_schedule(state_.epoch);
    schedule_epoch_ = state_.epoch;
  }
  const int64_t b = schedule_[static_cast<size_t>(state_.position)];
  ++state_.position;
  if (b < 0) {
    out.reset(0, 0, p_.pad);
    return true;
  }
  collate(batches_[static_cast<size_t>(b)], out);
  return true;
}

void BatchIterator::next_epoch() {
  ++state_.epoch;
  state_.position = 0;
}

void BatchIterator::collate(const std::vector<int64_t>& block_ids, Batch& out) const {
  int64_t width = 0;
  for (int64_t k : block_ids) width = std::max(width, blocks_->block_length(k));
  const auto rows = static_cast<int64_t>(block_ids.size());
  out.reset(rows, width, p_.pad);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = block_ids[static_cast<size_t>(r)];
    const int64_t len = blocks_->block_length(k);
    blocks_->source(k, out.src.i32() + r * width);
    blocks_->target(k, out.tgt.i32() + r * width);
    out.ids[static_cast<size_t>(r)] = k;
    out.offsets[static_cast<size_t>(r)] = blocks_->block_start(k);
    out.lengths[static_cast<size_t>(r)] = static_cast<int32_t>(len);
    out.ntokens += len;
  }
}

}  // namespace stretch::data
