// train/lm_data.cpp — the trainer's view of the data layer: dict.txt + MMIDIDX splits through
// data::TokenBlocks and data::BatchIterator (fairseq's block and batch semantics).
#include "train/lm_data.h"

#include <filesystem>

#include "core/error.h"
#include "data/batch_iterator.h"
#include "data/dictionary.h"
#include "data/indexed_dataset.h"
#include "data/token_blocks.h"

namespace stretch::train {
namespace fs = std::filesystem;

LmData open_lm_data(const std::string& data_dir) {
  if (!fs::is_directory(data_dir))
    fail_input(data_dir, "data directory not found", "make one with `stretch preprocess --only-source ... --destdir DIR`");
  const std::string dict_path = (fs::path(data_dir) / "dict.txt").string();
  if (!fs::exists(dict_path))
    fail_input(dict_path, "not found", "the data directory must hold the dict.txt written by `stretch preprocess`");
  data::Dictionary dict = data::Dictionary::load(dict_path);
  LmData d;
  d.vocab_size = dict.size();
  d.pad = dict.pad();
  d.eos = dict.eos();
  d.dict_hash = dict.content_hash();
  d.dict_path = dict_path;
  d.byte_level = dict.is_byte_level();
  return d;
}

namespace {

class BlockSplit final : public LmSplit {
 public:
  BlockSplit(std::shared_ptr<const data::TokenBlocks> blocks, const data::BatchIteratorParams& p)
      : iterator_(std::move(blocks), p) {}
  void set_epoch(int64_t epoch) override { schedule_ = iterator_.epoch_schedule(epoch); }
  int64_t num_batches() const override { return static_cast<int64_t>(schedule_.size()); }
  LmBatch batch(int64_t index) const override {
    LmBatch out;
    const int64_t b = schedule_.at(static_cast<size_t>(index));
    if (b < 0) return out;  // an empty fill batch (data parallelism): contributes nothing
    data::Batch batch;
    iterator_.collate(iterator_.frozen_batches()[static_cast<size_t>(b)], batch);
    out.src = batch.src;
    out.tgt = batch.tgt;
    out.ntokens = batch.ntokens;
    return out;
  }
  int64_t num_tokens() const override { return iterator_.blocks().stream().total_tokens(); }

 private:
  data::BatchIterator iterator_;
  std::vector<int64_t> schedule_;
};

}  // namespace

std::shared_ptr<const data::TokenStream> open_split_stream(const std::string& data_dir, const std::string& split,
                                                           const LmData& data) {
  const std::string prefix = (fs::path(data_dir) / split).string();
  if (!data::IndexedDataset::exists(prefix))
    fail_input(prefix + ".{bin,idx}", "split '" + split + "' not found",
               "binarize it with `stretch preprocess` (--" + split + "pref) or choose another subset");
  auto ds = data::IndexedDataset::open(prefix);
  ds->validate_ids(data.vocab_size, data.dict_path);
  if (ds->total_tokens() == 0) fail_input(prefix + ".bin", "split '" + split + "' is empty", "binarize a non-empty text");
  return ds;
}

std::unique_ptr<LmSplit> open_lm_split(const std::string& data_dir, const std::string& split, const LmData& data,
                                       const LmSplitOptions& o) {
  auto stream = open_split_stream(data_dir, split, data);
  auto blocks = std::make_shared<const data::TokenBlocks>(
      stream, data::TokenBlockParams{.block_size = o.tokens_per_sample,
                                     .break_mode = o.sample_break_mode,
                                     .eos = data.eos});
  data::BatchIteratorParams p;
  p.size = {.max_tokens = o.max_tokens, .max_sentences = o.batch_size,
            .required_batch_size_multiple = o.required_batch_size_multiple};
  p.seed = static_cast<uint32_t>(o.seed);
  p.epoch_order = o.shuffle ? data::EpochOrder::ShuffledPerEpoch : data::EpochOrder::Fixed;
  p.num_shards = o.shard_count;
  p.shard_id = o.shard_rank;
  p.pad = data.pad;
  auto split_ptr = std::make_unique<BlockSplit>(blocks, p);
  split_ptr->set_epoch(1);
  return split_ptr;
}

}  // namespace stretch::train
