// train/lm_data.cpp — the trainer's view of the data layer: dict.txt + MMIDIDX splits through
// data::TokenBlocks and data::BatchIterator (fairseq's block and batch semantics).
#include "train/lm_data.h"

#include <filesystem>

#include "core/error.h"
#include "data/batch_iterator.h"
#include "data/dictionary.h"
#include "data/indexed_dataset.h"
#include "data/token_blocks.h"
#include "train/masked_lm_data.h"

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
  d.bos = dict.bos();
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
  BlockSplit(std::shared_ptr<const data::TokenBlocks> blocks, const data::BatchIteratorParams& p, int32_t bos)
      : iterator_(std::move(blocks), p), bos_(bos) {}
  void set_epoch(int64_t epoch, bool shuffle) override { schedule_ = iterator_.epoch_schedule(epoch, shuffle); }
  int64_t num_batches() const override { return static_cast<int64_t>(schedule_.size()); }
  LmBatch batch(int64_t index) const override {
    LmBatch out;
    const int64_t b = schedule_.at(static_cast<size_t>(index));
    if (b < 0) return out;  // an empty fill batch (data parallelism): contributes nothing
    data::Batch batch;
    iterator_.collate(iterator_.frozen_batches()[static_cast<size_t>(b)], batch);
    if (bos_ >= 0) data::prepend_bos(batch, bos_);
    out.src = batch.src;
    out.tgt = batch.tgt;
    out.ntokens = batch.ntokens;
    return out;
  }
  int64_t num_tokens() const override { return iterator_.blocks().stream().total_tokens(); }

 private:
  data::BatchIterator iterator_;
  std::vector<int64_t> schedule_;
  int32_t bos_ = -1;  // --add-bos-token: <s> before every row; -1: none
};

// --task truncated_bptt_lm: every step of the streams is one batch, in order, every epoch.
class BpttSplit final : public LmSplit {
 public:
  explicit BpttSplit(data::BpttStreams streams) : streams_(std::move(streams)) {}
  void set_epoch(int64_t, bool) override {}  // fairseq: disable_shuffling, the same order every epoch
  int64_t num_batches() const override { return streams_.num_steps(); }
  LmBatch batch(int64_t index) const override { return bptt_batch(streams_, index); }
  int64_t num_tokens() const override { return total_; }
  int64_t total_ = 0;

 private:
  data::BpttStreams streams_;
};

}  // namespace

const char* lm_task_name(LmTask t) {
  switch (t) {
    case LmTask::LanguageModeling: return "language_modeling";
    case LmTask::TruncatedBptt: return "truncated_bptt_lm";
    case LmTask::MaskedLm: return "masked_lm";
  }
  return "?";
}

LmTask parse_lm_task(const std::string& name) {
  for (int i = 0; i < kLmTaskCount; ++i)
    if (name == lm_task_name(static_cast<LmTask>(i))) return static_cast<LmTask>(i);
  fail_usage("--task " + name + ": unknown task", "use language_modeling, truncated_bptt_lm or masked_lm (encoders)");
}

const char* bptt_order_name(data::BpttTargets t) {
  switch (t) {
    case data::BpttTargets::WithinBlock: return "fairseq";
    case data::BpttTargets::AcrossBlocks: return "transformer_xl";
  }
  return "?";
}

LmBatch bptt_batch(const data::BpttStreams& streams, int64_t step) {
  data::Batch b;
  streams.step(step, b);
  LmBatch out;
  out.src = b.src;
  out.tgt = b.tgt;
  // fairseq's _collate_fn: "ntokens": item.numel() (B·T of the padded block batch), which
  // cross_entropy / adaptive_loss return as sample_size and log as ntokens.
  out.ntokens = b.rows() * b.width();
  out.sample_size = out.ntokens;
  return out;
}

data::ShortenParams shorten_params(const LmSplitOptions& o) {
  return {.method = o.shorten_method, .split_list = o.shorten_data_split_list, .length = o.tokens_per_sample,
          .seed = static_cast<int64_t>(o.seed)};
}

std::shared_ptr<const data::TokenStream> open_split_stream(const std::string& data_dir, const std::string& split,
                                                           const LmData& data, const data::ShortenParams& shorten) {
  const std::string prefix = (fs::path(data_dir) / split).string();
  if (!data::IndexedDataset::exists(prefix))
    fail_input(prefix + ".{bin,idx}", "split '" + split + "' not found",
               "binarize it with `stretch preprocess` (--" + split + "pref) or choose another subset");
  auto ds = data::IndexedDataset::open(prefix);
  ds->validate_ids(data.vocab_size, data.dict_path);
  if (ds->total_tokens() == 0) fail_input(prefix + ".bin", "split '" + split + "' is empty", "binarize a non-empty text");
  return data::maybe_shorten(ds, split, shorten);
}

data::BatchIteratorParams batch_iterator_params(const LmSplitOptions& o, const LmData& data) {
  data::BatchIteratorParams p;
  p.size = {.max_tokens = o.max_tokens, .max_sentences = o.batch_size,
            .required_batch_size_multiple = o.required_batch_size_multiple};
  p.seed = static_cast<uint32_t>(o.seed);
  p.epoch_order = o.shuffle ? data::EpochOrder::ShuffledPerEpoch : data::EpochOrder::Fixed;
  p.num_shards = o.shard_count;
  p.shard_id = o.shard_rank;
  p.pad = data.pad;
  return p;
}

std::unique_ptr<LmSplit> open_lm_split(const std::string& data_dir, const std::string& split, const LmData& data,
                                       const LmSplitOptions& o) {
  if (o.add_bos_token && o.task != LmTask::LanguageModeling)
    fail_usage(std::string("--add-bos-token has no meaning with --task ") + lm_task_name(o.task) +
                   " (fairseq's flag belongs to the language_modeling task)",
               o.task == LmTask::MaskedLm ? "drop it: masked_lm rows already start with <s>"
                                          : "drop it, or train with --task language_modeling");
  if (o.task == LmTask::TruncatedBptt && o.shorten_method != data::ShortenMethod::None)
    fail_usage(std::string("--shorten-method ") + data::shorten_method_name(o.shorten_method) +
                   " has no meaning with --task truncated_bptt_lm (fairseq's flag belongs to language_modeling and "
                   "masked_lm; the streams read every token)",
               "drop --shorten-method");
  if (o.task == LmTask::MaskedLm) return open_masked_lm_split(data_dir, split, data, o, o.mask);
  auto stream = open_split_stream(data_dir, split, data, shorten_params(o));
  if (o.task == LmTask::TruncatedBptt) {
    if (o.batch_size < 1)
      fail_usage("--task truncated_bptt_lm needs --batch-size (the number of parallel streams)",
                 "e.g. --batch-size 22 as in Transformer-XL's enwik8 script; --max-tokens has no meaning for this task");
    auto split_ptr = std::make_unique<BpttSplit>(data::BpttStreams(
        stream, {.batch_size = o.batch_size,
                 .tokens_per_sample = o.tokens_per_sample,
                 .targets = o.bptt_order,
                 .num_shards = o.shard_count,
                 .shard_id = o.shard_rank,
                 .pad = data.pad,
                 .source = (fs::path(data_dir) / (split + ".bin")).string()}));
    split_ptr->total_ = stream->total_tokens();
    return split_ptr;
  }
  auto blocks = std::make_shared<const data::TokenBlocks>(
      stream, data::TokenBlockParams{.block_size = o.tokens_per_sample,
                                     .break_mode = o.sample_break_mode,
                                     .eos = data.eos});
  const data::BatchIteratorParams p = batch_iterator_params(o, data);
  auto split_ptr = std::make_unique<BlockSplit>(blocks, p, o.add_bos_token ? data.bos : -1);
  split_ptr->set_epoch(1, /*shuffle=*/true);
  return split_ptr;
}

}  // namespace stretch::train
