// data/eval_windows.cpp — see eval_windows.h.
#include "data/eval_windows.h"

#include <algorithm>
#include <iterator>
#include <numeric>

#include "core/error.h"
#include "data/numpy_random.h"

namespace stretch::data {

EvalWindowParams EvalWindowParams::from_stride(int64_t tokens_per_sample, int64_t stride) {
  if (stride < 1 || stride > tokens_per_sample)
    fail_usage("--stride " + std::to_string(stride) + " must be in [1, --tokens-per-sample " +
                   std::to_string(tokens_per_sample) + "]",
               "stride S scores S new tokens per window with L − S tokens of context");
  EvalWindowParams p;
  p.tokens_per_sample = tokens_per_sample;
  p.context_window = tokens_per_sample - stride;
  return p;
}

EvalWindows::EvalWindows(std::shared_ptr<const TokenStream> stream, EvalWindowParams p) : p_(p) {
  if (p_.tokens_per_sample < 1)
    fail_usage("--tokens-per-sample " + std::to_string(p_.tokens_per_sample) + " must be positive");
  if (p_.context_window < 0 || p_.context_window >= p_.tokens_per_sample)
    fail_usage("--context-window " + std::to_string(p_.context_window) + " must be in [0, --tokens-per-sample " +
                   std::to_string(p_.tokens_per_sample) + ")",
               "each window scores tokens_per_sample − context_window new tokens, so that must be at least 1");
  TokenBlockParams bp;
  bp.block_size = p_.tokens_per_sample - p_.context_window;
  bp.break_mode = p_.break_mode;
  bp.eos = p_.eos;
  blocks_ = std::make_shared<TokenBlocks>(std::move(stream), bp);
  if (p_.num_shards < 1 || p_.shard_id < 0 || p_.shard_id >= p_.num_shards)
    fail_usage("--shard-id " + std::to_string(p_.shard_id) + " must be in [0, --num-shards " +
                   std::to_string(p_.num_shards) + ")",
               "shards are numbered from 0");
  std::vector<int64_t> order(static_cast<size_t>(blocks_->size())), lengths(order.size());
  std::iota(order.begin(), order.end(), 0);
  for (size_t k = 0; k < order.size(); ++k) lengths[k] = blocks_->block_length(static_cast<int64_t>(k));
  // fairseq's order: MonolingualDataset (shuffle=True) gives np.lexsort([permutation, sizes])
  // under get_batch_iterator's numpy_seed(1), i.e. by (length, permutation value); the
  // LMContextWindowDataset (c > 0) keeps the natural order.
  fairseq_order_ = order;
  if (p_.context_window == 0) {
    const std::vector<int64_t> perm = NumpyRandomState(1).permutation(static_cast<int64_t>(order.size()));
    std::sort(fairseq_order_.begin(), fairseq_order_.end(), [&](int64_t a, int64_t b) {
      const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
      return lengths[ua] != lengths[ub] ? lengths[ua] < lengths[ub] : perm[ua] < perm[ub];
    });
  }
  if (p_.max_positions > 0) {
    auto too_long = [&](int64_t k) { return lengths[static_cast<size_t>(k)] > p_.max_positions; };
    std::copy_if(fairseq_order_.begin(), fairseq_order_.end(), std::back_inserter(skipped_), too_long);
    std::erase_if(fairseq_order_, too_long);
    std::erase_if(order, too_long);
  }
  if (p_.num_shards > 1) {
    const auto fairseq_batches = batch_by_size(fairseq_order_, lengths, p_.shard_size);
    std::vector<int64_t> kept;
    for (size_t b = static_cast<size_t>(p_.shard_id); b < fairseq_batches.size(); b += static_cast<size_t>(p_.num_shards))
      kept.insert(kept.end(), fairseq_batches[b].begin(), fairseq_batches[b].end());
    order = kept;
    fairseq_order_ = kept;
  }
  for (int64_t k : order) scored_tokens_ += lengths[static_cast<size_t>(k)];
  batches_ = order.empty() ? std::vector<std::vector<int64_t>>{} : batch_by_size(order, lengths, p_.size);
}

void EvalWindows::reset() {
  next_batch_ = 0;
  prev_.clear();
}

bool EvalWindows::next(Batch& out) {
  if (next_batch_ >= num_batches()) return false;
  const auto& ids = batches_[static_cast<size_t>(next_batch_++)];
  const int64_t c = p_.context_window;
  const int64_t max_len = p_.tokens_per_sample;  // (L − c) + c, fairseq's max_sample_len
  int64_t tsz = 0;
  for (int64_t k : ids) tsz = std::max(tsz, blocks_->block_length(k));
  const int64_t nb = p_.add_bos_token ? 1 : 0;  // <s> before each block (its target not scored)
  const int64_t width = tsz + nb + c;
  const auto rows = static_cast<int64_t>(ids.size());
  out.reset(rows, width, p_.pad);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = ids[static_cast<size_t>(r)];
    const int64_t len = blocks_->block_length(k);
    const int64_t extra = static_cast<int64_t>(prev_.size()) + nb + len - max_len;
    if (extra > 0) prev_.erase(prev_.begin(), prev_.begin() + std::min<int64_t>(extra, static_cast<int64_t>(prev_.size())));
    const auto np = static_cast<int64_t>(prev_.size());
    int32_t* in = out.src.i32() + r * width;
    int32_t* tg = out.tgt.i32() + r * width;
    std::copy(prev_.begin(), prev_.end(), in);
    if (nb) in[np] = p_.bos;
    blocks_->source(k, in + np + nb);
    blocks_->target(k, tg + np + nb);
    out.ids[static_cast<size_t>(r)] = k;
    out.offsets[static_cast<size_t>(r)] = blocks_->block_start(k);
    out.lengths[static_cast<size_t>(r)] = static_cast<int32_t>(np + nb + len);
    out.starts[static_cast<size_t>(r)] = static_cast<int32_t>(np + nb);
    out.ntokens += len;
    // prev = the last c non-pad tokens of the input row.
    row_.clear();
    for (int64_t j = 0; j < width; ++j)
      if (in[j] != p_.pad) row_.push_back(in[j]);
    const int64_t keep = std::min<int64_t>(c, static_cast<int64_t>(row_.size()));
    prev_.assign(row_.end() - keep, row_.end());
  }
  return true;
}

}  // namespace stretch::data
