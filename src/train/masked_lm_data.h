// train/masked_lm_data.h — fairseq 0.12.2's --task masked_lm (tasks/masked_lm.py with
// data/mask_tokens_dataset.py) for the encoder family.
// Contract:
//   * Dictionary: dict.txt as preprocess wrote it, then "<mask>" appended (fairseq's
//     dictionary.add_symbol at task setup): mask_idx = dict size, V = dict size + 1. A split that
//     already holds that id is an error naming the file (fairseq asserts the same).
//   * Items: fairseq's TokenBlockDataset of --tokens-per-sample − 1 tokens (--sample-break-mode
//     none | complete | eos, data/token_blocks.h; the block itself, no shift) with <s> prepended:
//     rows of at most --tokens-per-sample tokens, batched as language_modeling's blocks are
//     (data::BatchIterator over the L − 1 blocks: --max-tokens, --batch-size, shards, epoch order).
//   * Masking of item k in epoch e (mask_block): numpy's RandomState seeded with
//     int(hash((seed, e, k)) % 1e6), as fairseq's numpy_seed(seed, epoch, index); then exactly
//     MaskTokensDataset's draws: num_mask = int(mask_prob·sz + rand()), the positions
//     permutation(sz)[:num_mask] (choice without replacement), rand(sz) < leave_unmasked_prob +
//     random_token_prob picks the unmasked-or-random ones among them, rand(sz) < leave/(leave +
//     random) splits them; the rest become <mask>, the random ones choice(V, n, p) with p uniform
//     over every id but the 4 specials (<mask> and the padding symbols included, as fairseq).
//     Targets: the original token at every chosen position (80/10/10 ones alike), pad elsewhere.
//     The <s> at position 0 can be chosen, as in fairseq.
//   * LmBatch: src [B, T] the masked rows, tgt [B, T]; ntokens = sample_size = the number of
//     chosen positions (fairseq's masked_lm sample_size; the logged loss is per masked token,
//     as fairseq's; fairseq's wpb counts every input token instead).
//   * Validation and evaluation use epoch 1 (fairseq's valid iterator), so a split's masks are
//     the same at every validation; training redraws them every epoch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "train/lm_data.h"

namespace stretch::train {

struct MaskParams {
  MaskSettings settings{};
  uint64_t seed = 1;
  int64_t vocab_size = 0;  // V, <mask> included
  int32_t mask_idx = 0;
  int32_t pad = 1;
};

// item [sz] -> src [sz] (masked) and tgt [sz] (original at the chosen positions, pad elsewhere);
// returns the number of chosen positions.
int64_t mask_block(const int32_t* item, int64_t sz, int64_t epoch, int64_t index, const MaskParams& p, int32_t* src,
                   int32_t* tgt);

// DATA/dict.txt with <mask> appended: vocab_size + 1.
LmData open_masked_lm_data(const std::string& data_dir);
// The masked_lm batches of DATA/<split> (`data` from open_masked_lm_data); open_lm_split() calls
// it for LmTask::MaskedLm with options.mask.
std::unique_ptr<LmSplit> open_masked_lm_split(const std::string& data_dir, const std::string& split,
                                              const LmData& data, const LmSplitOptions& options,
                                              const MaskSettings& mask);

}  // namespace stretch::train
