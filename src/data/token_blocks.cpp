// data/token_blocks.cpp — see token_blocks.h.
#include "data/token_blocks.h"

#include <algorithm>

#include "core/error.h"

namespace stretch::data {

BreakMode parse_break_mode(const std::string& s) {
  if (s == "none") return BreakMode::None;
  if (s == "eos") return BreakMode::Eos;
  if (s == "complete") return BreakMode::Complete;
  fail_usage("--sample-break-mode " + s + ": unknown break mode",
             "use none (fixed blocks across lines), eos (one line per block) or complete (whole lines up to "
             "--tokens-per-sample); complete_doc is not supported");
}

const char* break_mode_name(BreakMode m) {
  switch (m) {
    case BreakMode::None: return "none";
    case BreakMode::Eos: return "eos";
    case BreakMode::Complete: return "complete";
  }
  return "?";
}

TokenBlocks::TokenBlocks(std::shared_ptr<const TokenStream> stream, TokenBlockParams p)
    : stream_(std::move(stream)), p_(p) {
  STRETCH_CHECK(stream_, "TokenBlocks needs a stream");
  if (p_.break_mode != BreakMode::Eos && p_.block_size <= 0)
    fail_usage("--tokens-per-sample " + std::to_string(p_.block_size) + ": must be positive");
  const int64_t n = stream_->total_tokens();
  const auto& off = stream_->item_offsets();
  bounds_.assign(1, 0);
  switch (p_.break_mode) {
    case BreakMode::None:
      for (int64_t s = 0; s < n; s += p_.block_size) bounds_.push_back(std::min(s + p_.block_size, n));
      break;
    case BreakMode::Eos:
      for (size_t i = 1; i < off.size(); ++i) bounds_.push_back(off[i]);
      break;
    case BreakMode::Complete: {
      int64_t cur = 0;
      for (size_t i = 0; i + 1 < off.size(); ++i) {
        const int64_t sz = off[i + 1] - off[i];
        if (cur + sz <= p_.block_size || cur == 0) {
          cur += sz;
        } else {
          bounds_.push_back(bounds_.back() + cur);
          cur = sz;
        }
      }
      if (cur > 0) bounds_.push_back(bounds_.back() + cur);
      break;
    }
  }
  for (int64_t k = 0; k < size(); ++k) max_length_ = std::max(max_length_, block_length(k));
}

bool TokenBlocks::is_item_start(int64_t j) const {
  const auto& off = stream_->item_offsets();
  return std::binary_search(off.begin(), off.end() - 1, j);
}

void TokenBlocks::target(int64_t k, int32_t* out) const {
  stream_->read_tokens(block_start(k), block_length(k), out);
}

void TokenBlocks::source(int64_t k, int32_t* out) const {
  const int64_t s = block_start(k), len = block_length(k);
  if (len == 0) return;
  if (s == 0 || is_item_start(s)) {
    out[0] = p_.eos;
    stream_->read_tokens(s, len - 1, out + 1);
  } else {
    stream_->read_tokens(s - 1, len, out);
  }
}

std::vector<int32_t> TokenBlocks::target(int64_t k) const {
  std::vector<int32_t> v(static_cast<size_t>(block_length(k)));
  target(k, v.data());
  return v;
}

std::vector<int32_t> TokenBlocks::source(int64_t k) const {
  std::vector<int32_t> v(static_cast<size_t>(block_length(k)));
  source(k, v.data());
  return v;
}

}  // namespace stretch::data
