// data/bptt_stream.cpp — see bptt_stream.h.
#include "data/bptt_stream.h"

#include <algorithm>

#include "core/error.h"

namespace stretch::data {

BpttStreams::BpttStreams(std::shared_ptr<const TokenStream> stream, BpttParams p) : stream_(std::move(stream)), p_(p) {
  STRETCH_CHECK(stream_, "BpttStreams needs a stream");
  if (p_.batch_size < 1) fail_usage("--batch-size " + std::to_string(p_.batch_size) + " must be positive");
  if (p_.tokens_per_sample < 1)
    fail_usage("--tokens-per-sample " + std::to_string(p_.tokens_per_sample) + " must be positive");
  if (p_.num_shards < 1 || p_.shard_id < 0 || p_.shard_id >= p_.num_shards)
    fail_usage("shard " + std::to_string(p_.shard_id) + " of " + std::to_string(p_.num_shards) + " does not exist");
  const int64_t g = p_.batch_size * p_.num_shards;
  const int64_t n = stream_->total_tokens();
  const int64_t t = p_.tokens_per_sample;
  if (p_.targets == BpttTargets::WithinBlock) {
    const int64_t blocks = (n + t - 1) / t;
    row_len_ = blocks / g;
    num_steps_ = row_len_;
  } else {
    row_len_ = n / g;
    num_steps_ = row_len_ > 1 ? (row_len_ - 1 + t - 1) / t : 0;
  }
  if (num_steps_ == 0)
    fail_input(p_.source, "too small for truncated BPTT: " + std::to_string(n) + " tokens cannot fill " + std::to_string(g) +
                           " streams of at least one block of " + std::to_string(t) + " tokens",
               "lower --batch-size or --tokens-per-sample, or use more data");
}

void BpttStreams::step(int64_t i, Batch& out) const {
  STRETCH_CHECK(i >= 0 && i < num_steps_, "step " << i << " of " << num_steps_);
  const int64_t b = p_.batch_size, t = p_.tokens_per_sample, n = stream_->total_tokens();
  if (p_.targets == BpttTargets::WithinBlock) {
    int64_t width = 0;
    std::vector<int64_t> block(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      const int64_t global_row = p_.shard_id * b + r;
      const int64_t k = global_row * row_len_ + i;
      block[static_cast<size_t>(r)] = k;
      width = std::max(width, std::min(t, n - k * t));
    }
    out.reset(b, width, p_.pad);
    for (int64_t r = 0; r < b; ++r) {
      const int64_t k = block[static_cast<size_t>(r)];
      const int64_t start = k * t, len = std::min(t, n - start);
      int32_t* s = out.src.i32() + r * width;
      int32_t* y = out.tgt.i32() + r * width;
      stream_->read_tokens(start, len, s);
      if (len > 1) std::copy(s + 1, s + len, y);
      out.ids[static_cast<size_t>(r)] = k;
      out.offsets[static_cast<size_t>(r)] = start + 1;
      out.lengths[static_cast<size_t>(r)] = static_cast<int32_t>(len);
      out.ntokens += len - 1;
    }
  } else {
    const int64_t col = i * t;
    const int64_t s_len = std::min(t, row_len_ - 1 - col);
    out.reset(b, s_len, p_.pad);
    std::vector<int32_t> buf(static_cast<size_t>(s_len + 1));
    for (int64_t r = 0; r < b; ++r) {
      const int64_t global_row = p_.shard_id * b + r;
      const int64_t start = global_row * row_len_ + col;
      stream_->read_tokens(start, s_len + 1, buf.data());
      std::copy(buf.begin(), buf.begin() + s_len, out.src.i32() + r * s_len);
      std::copy(buf.begin() + 1, buf.end(), out.tgt.i32() + r * s_len);
      out.ids[static_cast<size_t>(r)] = global_row;
      out.offsets[static_cast<size_t>(r)] = start + 1;
      out.lengths[static_cast<size_t>(r)] = static_cast<int32_t>(s_len);
      out.ntokens += s_len;
    }
  }
}

}  // namespace stretch::data
