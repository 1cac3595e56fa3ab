// data/shorten.h — fairseq's --shorten-method / --shorten-data-split-list (data/shorten_dataset.py,
// maybe_shorten_dataset, 0.12.2): before the token blocks, every item (line) longer than the
// length L (--tokens-per-sample) is cut to L tokens.
//   truncate     its first L tokens (TruncateDataset);
//   random_crop  L tokens from a start drawn as RandomCropDataset draws it: under
//                data_utils.numpy_seed(seed, epoch, index), np.random.randint(0, excess) with
//                excess = size − L, so the start is in [0, excess − 1] (the last crop is never drawn).
//                The epoch is 0 in the language_modeling and masked_lm tasks: TokenBlockDataset does
//                not pass set_epoch on, so fairseq crops every item the same way in every epoch.
// A split is shortened when it is in the comma-separated list, or when the list is empty.
// numpy_seed's seed is int(hash((seed, epoch, index)) % 1e6) of CPython >= 3.8 (its xxHash-style
// tuple hash over the ints' own hashes), which python_tuple_seed() reproduces.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace stretch::data {

enum class ShortenMethod : uint8_t { None, Truncate, RandomCrop };
inline constexpr int kShortenMethodCount = 3;
const char* shorten_method_name(ShortenMethod m);  // "none" | "truncate" | "random_crop"
// The method of that name; a usage error naming --shorten-method otherwise.
ShortenMethod parse_shorten_method(const std::string& s);

struct ShortenParams {
  ShortenMethod method = ShortenMethod::None;
  std::string split_list{};  // --shorten-data-split-list ("" = every split)
  int64_t length = 0;        // L
  int64_t seed = 1;          // --seed
};

// fairseq's truncate_split: `split in split_list.split(",") or len(split_list) == 0`.
bool shortens_split(const std::string& split_list, const std::string& split);

// int(hash(tuple(values)) % 1e6) in CPython >= 3.8 (64-bit), for non-negative values < 2^61 − 1.
uint32_t python_tuple_seed(std::initializer_list<int64_t> values);

// The start of item `index`'s crop (size > length) as RandomCropDataset draws it in `epoch`.
int64_t random_crop_start(int64_t size, int64_t length, int64_t seed, int64_t epoch, int64_t index);

// `base` with its items shortened (method Truncate or RandomCrop, epoch 0 as fairseq's tasks have it).
class ShortenedTokenStream final : public TokenStream {
 public:
  ShortenedTokenStream(std::shared_ptr<const TokenStream> base, const ShortenParams& p);
  void read_tokens(int64_t offset, int64_t count, int32_t* out) const override;
  int64_t shortened_items() const { return shortened_; }

 private:
  std::shared_ptr<const TokenStream> base_;
  std::vector<int64_t> base_start_;  // [N] the base offset of each kept item's first token
  int64_t shortened_ = 0;
};

// `stream` itself, or a ShortenedTokenStream of it when p shortens `split`.
std::shared_ptr<const TokenStream> maybe_shorten(std::shared_ptr<const TokenStream> stream, const std::string& split,
                                                 const ShortenParams& p);

}  // namespace stretch::data
