// train/masked_lm_data.cpp — see masked_lm_data.h.
#include "train/masked_lm_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/batch_iterator.h"
#include "data/numpy_random.h"
#include "data/token_blocks.h"
#include "train/best_checkpoints.h"

namespace stretch::train {
namespace fs = std::filesystem;

void MaskSettings::validate() const {
  auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  if (!(mask_prob > 0.0 && mask_prob < 1.0))
    fail_usage("--mask-prob " + text(mask_prob) + ": must be in (0, 1)", "fairseq's default is 0.15");
  if (!(leave_unmasked_prob >= 0.0 && leave_unmasked_prob <= 1.0))
    fail_usage("--leave-unmasked-prob " + text(leave_unmasked_prob) + ": must be in [0, 1]", "fairseq's default is 0.1");
  if (!(random_token_prob >= 0.0 && random_token_prob <= 1.0))
    fail_usage("--random-token-prob " + text(random_token_prob) + ": must be in [0, 1]", "fairseq's default is 0.1");
  if (leave_unmasked_prob + random_token_prob > 1.0)
    fail_usage("--leave-unmasked-prob " + text(leave_unmasked_prob) + " + --random-token-prob " +
                   text(random_token_prob) + " > 1",
               "they are shares of the chosen tokens: their sum must be at most 1");
}

namespace {

// fairseq's data_utils.numpy_seed(seed, epoch, index): int(hash((seed, epoch, index)) % 1e6).
uint32_t item_seed(uint64_t seed, int64_t epoch, int64_t index) {
  const int64_t h = python_hash_tuple(
      {python_hash_int(static_cast<int64_t>(seed)), python_hash_int(epoch), python_hash_int(index)});
  double r = std::fmod(static_cast<double>(h), 1e6);  // Python's int % float takes the divisor's sign
  if (r < 0) r += 1e6;
  return static_cast<uint32_t>(r);
}

}  // namespace

int64_t mask_block(const int32_t* item, int64_t sz, int64_t epoch, int64_t index, const MaskParams& p, int32_t* src,
                   int32_t* tgt) {
  data::NumpyRandomState rng(item_seed(p.seed, epoch, index));
  const MaskSettings& s = p.settings;
  const auto n = static_cast<size_t>(sz);
  std::vector<uint8_t> mask(n, 0);
  const auto num_mask = static_cast<int64_t>(s.mask_prob * static_cast<double>(sz) + rng.random_sample());
  const std::vector<int64_t> perm = rng.permutation(sz);  // choice(sz, num_mask, replace=False)
  for (int64_t i = 0; i < num_mask; ++i) mask[static_cast<size_t>(perm[static_cast<size_t>(i)])] = 1;
  int64_t chosen = 0;
  for (size_t i = 0; i < n; ++i) {
    tgt[i] = mask[i] ? item[i] : p.pad;
    src[i] = item[i];
    chosen += mask[i];
  }
  std::vector<uint8_t> unmask(n, 0), random(n, 0);
  const double either = s.random_token_prob + s.leave_unmasked_prob;
  if (either > 0.0) {
    std::vector<uint8_t> pick(n, 0);
    for (size_t i = 0; i < n; ++i) {  // rand(sz): one draw per position, chosen or not
      const bool below = rng.random_sample() < either;
      pick[i] = mask[i] && below;
    }
    if (s.random_token_prob == 0.0) {
      unmask = pick;
    } else if (s.leave_unmasked_prob == 0.0) {
      random = pick;
    } else {
      const double unmask_prob = s.leave_unmasked_prob / either;
      for (size_t i = 0; i < n; ++i) {
        const bool decision = rng.random_sample() < unmask_prob;
        unmask[i] = pick[i] && decision;
        random[i] = pick[i] && !decision;
      }
    }
  }
  int64_t num_random = 0;
  for (size_t i = 0; i < n; ++i) {
    if (mask[i] && !unmask[i]) src[i] = p.mask_idx;
    num_random += random[i];
  }
  if (num_random > 0) {
    // choice(V, num_random, p): the cdf of p (uniform over ids >= 4) in double, as numpy's
    // cumsum and cdf /= cdf[-1], then searchsorted(side='right') of random_sample() draws.
    const int64_t V = p.vocab_size;
    std::vector<double> cdf(static_cast<size_t>(V));
    const double w = 1.0 / static_cast<double>(V - 4);
    double acc = 0;
    for (int64_t v = 0; v < V; ++v) cdf[static_cast<size_t>(v)] = acc += (v < 4 ? 0.0 : w);
    const double last = cdf.back();
    for (double& c : cdf) c /= last;
    for (size_t i = 0; i < n; ++i) {
      if (!random[i]) continue;
      const double u = rng.random_sample();
      src[i] = static_cast<int32_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    }
  }
  return chosen;
}

LmData open_masked_lm_data(const std::string& data_dir) {
  LmData d = open_lm_data(data_dir);
  d.vocab_size += 1;  // <mask> = the old size
  return d;
}

namespace {

class MaskedSplit final : public LmSplit {
 public:
  MaskedSplit(std::shared_ptr<const data::TokenBlocks> blocks, const data::BatchIteratorParams& bp, MaskParams mp,
              int32_t bos, std::string source)
      : iterator_(std::move(blocks), bp), mask_(mp), bos_(bos), source_(std::move(source)) {}
  void set_epoch(int64_t epoch, bool shuffle) override {
    epoch_ = epoch;
    schedule_ = iterator_.epoch_schedule(epoch, shuffle);
  }
  int64_t num_batches() const override { return static_cast<int64_t>(schedule_.size()); }
  int64_t num_tokens() const override { return iterator_.blocks().stream().total_tokens(); }
  LmBatch batch(int64_t index) const override {
    LmBatch out;
    const int64_t b = schedule_.at(static_cast<size_t>(index));
    if (b < 0) return out;  // an empty fill batch (data parallelism)
    const std::vector<int64_t>& ids = iterator_.frozen_batches()[static_cast<size_t>(b)];
    const data::TokenBlocks& blocks = iterator_.blocks();
    int64_t width = 0;
    for (int64_t k : ids) width = std::max(width, blocks.block_length(k) + 1);
    const auto B = static_cast<int64_t>(ids.size());
    out.src = Tensor::empty({B, width}, DType::I32);  // [B, T]
    out.tgt = Tensor::empty({B, width}, DType::I32);
    std::fill_n(out.src.i32(), B * width, mask_.pad);
    std::fill_n(out.tgt.i32(), B * width, mask_.pad);
    std::vector<int32_t> item;
    for (int64_t r = 0; r < B; ++r) {
      const int64_t k = ids[static_cast<size_t>(r)];
      item.assign(1, bos_);  // PrependTokenDataset(<s>)
      const std::vector<int32_t> block = blocks.target(k);
      item.insert(item.end(), block.begin(), block.end());
      for (size_t i = 0; i < item.size(); ++i)
        if (item[i] == mask_.mask_idx)
          fail_input(source_, "token " + std::to_string(blocks.block_start(k) + static_cast<int64_t>(i) - 1) +
                                  " is id " + std::to_string(mask_.mask_idx) + ", the <mask> id --task masked_lm appends",
                     "the data was binarized with another dictionary: preprocess it again");
      out.ntokens += mask_block(item.data(), static_cast<int64_t>(item.size()), epoch_, k, mask_,
                                out.src.i32() + r * width, out.tgt.i32() + r * width);
    }
    out.sample_size = out.ntokens;
    return out;
  }

 private:
  data::BatchIterator iterator_;
  MaskParams mask_;
  int32_t bos_;
  std::string source_;
  int64_t epoch_ = 1;
  std::vector<int64_t> schedule_;
};

}  // namespace

std::unique_ptr<LmSplit> open_masked_lm_split(const std::string& data_dir, const std::string& split,
                                              const LmData& data, const LmSplitOptions& o, const MaskSettings& mask) {
  mask.validate();
  if (o.tokens_per_sample < 2)
    fail_usage("--tokens-per-sample " + std::to_string(o.tokens_per_sample) + ": --task masked_lm needs >= 2",
               "a block is <s> plus --tokens-per-sample - 1 tokens");
  LmData without_mask = data;
  without_mask.vocab_size = data.vocab_size - 1;  // ids of the data: dict.txt's
  auto stream = open_split_stream(data_dir, split, without_mask, shorten_params(o));
  auto blocks = std::make_shared<const data::TokenBlocks>(
      stream, data::TokenBlockParams{.block_size = o.tokens_per_sample - 1,  // one less for <s>
                                     .break_mode = o.sample_break_mode,
                                     .eos = data.eos});
  const data::BatchIteratorParams p = batch_iterator_params(o, data);
  const MaskParams mp{.settings = mask,
                      .seed = o.seed,
                      .vocab_size = data.vocab_size,
                      .mask_idx = static_cast<int32_t>(data.vocab_size - 1),
                      .pad = data.pad};
  auto out = std::make_unique<MaskedSplit>(blocks, p, mp, /*bos=*/0, (fs::path(data_dir) / (split + ".bin")).string());
  out->set_epoch(1, /*shuffle=*/true);
  return out;
}

}  // namespace stretch::train
