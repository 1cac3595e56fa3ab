// data/token_blocks.h — fairseq's TokenBlockDataset with include_targets (REFERENCE.md §4.3).
// Contract: the stream S (all items back to back, N tokens) is cut into contiguous,
// non-overlapping blocks that cover it:
//   BreakMode::None     — [kL, min((k+1)L, N)) for k = 0..ceil(N/L)-1; lines are ignored.
//   BreakMode::Eos      — one block per item (line); block_size is ignored.
//   BreakMode::Complete — whole items packed greedily while the block stays <= L; an item
//                         longer than L is a block of its own.
// target(k) = S[start, end). source(k) = the same span shifted right by one: its first
// token is </s> when the block starts an item (always in Eos/Complete mode, and for k = 0),
// else S[start-1]; then S[start, end-1). With items that end in </s> (all binarized text)
// this is "the stream shifted right with eos first".
// Example (L=4, S = 10..19 as one item): block 0 src [2,10,11,12] tgt [10,11,12,13];
// block 1 src [13,14,15,16] tgt [14,15,16,17]; block 2 src [17,18] tgt [18,19].
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace stretch::data {

enum class BreakMode : uint8_t { None, Eos, Complete };
// "none" | "eos" | "complete" (fairseq's --sample-break-mode); Error naming the flag otherwise.
BreakMode parse_break_mode(const std::string& s);
const char* break_mode_name(BreakMode m);
inline constexpr int kBreakModeCount = 3;

struct TokenBlockParams {
  int64_t block_size = 512;             // L = --tokens-per-sample
  BreakMode break_mode = BreakMode::None;
  int32_t eos = 2;
};

class TokenBlocks {
 public:
  TokenBlocks(std::shared_ptr<const TokenStream> stream, TokenBlockParams p);

  int64_t size() const { return static_cast<int64_t>(bounds_.size()) - 1; }  // number of blocks
  int64_t block_start(int64_t k) const { return bounds_[static_cast<size_t>(k)]; }
  int64_t block_length(int64_t k) const { return bounds_[static_cast<size_t>(k) + 1] - bounds_[static_cast<size_t>(k)]; }
  int64_t max_block_length() const { return max_length_; }
  // True if stream position j is the first token of an item (j == 0 included).
  bool is_item_start(int64_t j) const;

  void target(int64_t k, int32_t* out) const;  // out[block_length(k)]
  void source(int64_t k, int32_t* out) const;  // out[block_length(k)]
  std::vector<int32_t> target(int64_t k) const;
  std::vector<int32_t> source(int64_t k) const;

  const TokenStream& stream() const { return *stream_; }
  const TokenBlockParams& params() const { return p_; }

 private:
  std::shared_ptr<const TokenStream> stream_;
  TokenBlockParams p_;
  std::vector<int64_t> bounds_;  // [size() + 1] block boundaries in stream offsets
  int64_t max_length_ = 0;
};

}  // namespace stretch::data
