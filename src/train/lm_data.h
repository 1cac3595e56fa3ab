// train/lm_data.h — what the trainer and evaluator need from the data layer: a dictionary and,
// per split, the batches of one epoch in a resumable order.
// Contract: src/tgt are [B, T] I32, right-padded with pad (1); tgt is the block, src the block
// shifted right with eos first (REFERENCE.md §4.3); ntokens counts non-pad targets.
// --task truncated_bptt_lm (LmTask::TruncatedBptt, REFERENCE.md §6.5): batch i is step i of
// data::BpttStreams (B = --batch-size streams per process over the whole split, in order, never
// shuffled; targets within the block [FS] or across blocks [XL]); ntokens and sample_size are
// fairseq's sample["ntokens"] = B·T (every position, the unscored last one and the padding of a
// short final block included), what fairseq's criteria divide by and log.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/batch_iterator.h"
#include "data/bptt_stream.h"
#include "data/shorten.h"
#include "data/token_blocks.h"
#include "tensor/tensor.h"

namespace stretch::data {
class TokenStream;
}

namespace stretch::train {

struct LmBatch {
  Tensor src;  // [B, T] I32
  Tensor tgt;  // [B, T] I32
  int64_t ntokens = 0;      // fairseq's sample["ntokens"]: what the logs count (wpb, the loss divisor)
  int64_t sample_size = 0;  // the gradient's divisor when the task fixes it (truncated_bptt_lm: B·T); 0: the head's
};

// --task: language_modeling (fairseq's LanguageModelingTask) or truncated_bptt_lm
// (examples/truncated_bptt's TruncatedBPTTLMTask).
// masked_lm: fairseq's MaskedLMTask for encoders (train/masked_lm_data.h).
enum class LmTask : uint8_t { LanguageModeling, TruncatedBptt, MaskedLm };
inline constexpr int kLmTaskCount = 3;
const char* lm_task_name(LmTask t);
LmTask parse_lm_task(const std::string& name);  // a usage error naming --task for anything else
// --bptt-order (stretch): fairseq's block order [FS] (targets within a block) or the original
// Transformer-XL's LMOrderedIterator [XL] (targets cross segment boundaries).
inline constexpr int kBpttOrderCount = 2;
const char* bptt_order_name(data::BpttTargets t);

// --task masked_lm's masking (fairseq's MaskTokensDataset arguments; train/masked_lm_data.h).
struct MaskSettings {
  double mask_prob = 0.15;           // --mask-prob
  double leave_unmasked_prob = 0.1;  // --leave-unmasked-prob
  double random_token_prob = 0.1;    // --random-token-prob
  void validate() const;             // fairseq's asserts, as usage errors naming the flag
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
  LmTask task = LmTask::LanguageModeling;
  data::BpttTargets bptt_order = data::BpttTargets::WithinBlock;  // truncated_bptt_lm only
  MaskSettings mask{};                                              // masked_lm only
  // fairseq's --add-bos-token (language_modeling only): <s> before every row's source and target
  // (data::prepend_bos); batching still counts the blocks' own lengths, as fairseq's does.
  bool add_bos_token = false;
  // fairseq's --shorten-method / --shorten-data-split-list (language_modeling and masked_lm; data/shorten.h):
  // lines longer than --tokens-per-sample cut before the blocks. Its length and seed are filled in by
  // open_lm_split from tokens_per_sample and seed.
  data::ShortenMethod shorten_method = data::ShortenMethod::None;
  std::string shorten_data_split_list{};
};

class LmSplit {
 public:
  virtual ~LmSplit() = default;
  // 1-based; reshuffles the batch order (seed + epoch); shuffle = false keeps the frozen order (--curriculum).
  virtual void set_epoch(int64_t epoch, bool shuffle = true) = 0;
  virtual int64_t num_batches() const = 0;         // in this epoch, for this shard
  virtual LmBatch batch(int64_t index) const = 0;  // index-th batch of the epoch
  virtual int64_t num_tokens() const = 0;          // tokens in the split
};

// One step of truncated-BPTT streams as an LmBatch (ntokens = sample_size = B·T).
LmBatch bptt_batch(const data::BpttStreams& streams, int64_t step);

struct LmData {
  int64_t vocab_size = 0;
  int32_t bos = 0, pad = 1, eos = 2;
  std::string dict_hash;
  std::string dict_path;
  bool byte_level = false;  // every symbol is a byte value: loss per token = bits per byte
};

// Opens DATA/dict.txt; errors name the file and line.
LmData open_lm_data(const std::string& data_dir);
// The concatenated token stream of DATA/<split>.{bin,idx}, ids checked < vocab_size.
// With `shorten`, the stream is data::maybe_shorten's (the split's lines shortened when p says so).
std::shared_ptr<const data::TokenStream> open_split_stream(const std::string& data_dir, const std::string& split,
                                                           const LmData& data, const data::ShortenParams& shorten = {});
// The shortening of a split opened with `o` (its length --tokens-per-sample, its seed --seed).
data::ShortenParams shorten_params(const LmSplitOptions& o);
// The batch iterator's settings for a block split (language_modeling and masked_lm): sizes, seed,
// shuffle, shard and pad from the options.
data::BatchIteratorParams batch_iterator_params(const LmSplitOptions& o, const LmData& data);
// Opens DATA/<split>.{bin,idx}; checks every id < vocab_size; errors name the file. A usage error
// names --add-bos-token with a task other than language_modeling.
std::unique_ptr<LmSplit> open_lm_split(const std::string& data_dir, const std::string& split, const LmData& data,
                                       const LmSplitOptions& options);

}  // namespace stretch::train
