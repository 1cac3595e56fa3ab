// data/shorten.cpp — see shorten.h.
#include "data/shorten.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "data/numpy_random.h"

namespace stretch::data {

const char* shorten_method_name(ShortenMethod m) {
  switch (m) {
    case ShortenMethod::None: return "none";
    case ShortenMethod::Truncate: return "truncate";
    case ShortenMethod::RandomCrop: return "random_crop";
  }
  return "?";
}

ShortenMethod parse_shorten_method(const std::string& s) {
  for (int i = 0; i < kShortenMethodCount; ++i)
    if (s == shorten_method_name(static_cast<ShortenMethod>(i))) return static_cast<ShortenMethod>(i);
  fail_usage("--shorten-method " + s + ": unknown method", "use none, truncate or random_crop");
}

bool shortens_split(const std::string& split_list, const std::string& split) {
  if (split_list.empty()) return true;
  std::istringstream in(split_list);
  for (std::string s; std::getline(in, s, ',');)
    if (s == split) return true;
  return false;
}

uint32_t python_tuple_seed(std::initializer_list<int64_t> values) {
  // Objects/tupleobject.c (CPython 3.8+, 64-bit Py_uhash_t); hash(int) = the int for 0 <= x < 2^61 − 1.
  constexpr uint64_t kPrime1 = 11400714785074694791ull, kPrime2 = 14029467366897019727ull,
                     kPrime5 = 2870177450012600261ull;
  uint64_t acc = kPrime5;
  for (int64_t v : values) {
    STRETCH_CHECK(v >= 0 && v < (int64_t{1} << 61) - 1, "python_tuple_seed: " << v << " is outside [0, 2^61 - 1)");
    acc += static_cast<uint64_t>(v) * kPrime2;
    acc = (acc << 31) | (acc >> 33);
    acc *= kPrime1;
  }
  acc += static_cast<uint64_t>(values.size()) ^ (kPrime5 ^ 3527539ull);
  if (acc == ~uint64_t{0}) acc = 1546275796;
  // int(h % 1e6): int % float converts h to the nearest double, then float_rem (the sign of 1e6).
  double mod = std::fmod(static_cast<double>(static_cast<int64_t>(acc)), 1e6);
  if (mod < 0) mod += 1e6;
  return static_cast<uint32_t>(mod);
}

int64_t random_crop_start(int64_t size, int64_t length, int64_t seed, int64_t epoch, int64_t index) {
  const int64_t excess = size - length;
  if (excess <= 0) return 0;
  NumpyRandomState rs(python_tuple_seed({seed, epoch, index}));
  return static_cast<int64_t>(rs.interval(static_cast<uint64_t>(excess - 1)));  // randint(0, excess)
}

ShortenedTokenStream::ShortenedTokenStream(std::shared_ptr<const TokenStream> base, const ShortenParams& p)
    : base_(std::move(base)) {
  STRETCH_CHECK(p.method != ShortenMethod::None && p.length > 0, "ShortenedTokenStream needs a method and a length");
  const int64_t n = base_->num_items();
  base_start_.resize(static_cast<size_t>(n));
  offsets_.resize(static_cast<size_t>(n) + 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = base_->item_size(i), kept = std::min(size, p.length);
    int64_t start = 0;
    if (size > p.length) {
      ++shortened_;
      if (p.method == ShortenMethod::RandomCrop) start = random_crop_start(size, p.length, p.seed, /*epoch=*/0, i);
    }
    base_start_[static_cast<size_t>(i)] = base_->item_offsets()[static_cast<size_t>(i)] + start;
    offsets_[static_cast<size_t>(i) + 1] = offsets_[static_cast<size_t>(i)] + kept;
  }
}

void ShortenedTokenStream::read_tokens(int64_t offset, int64_t count, int32_t* out) const {
  STRETCH_CHECK(offset >= 0 && count >= 0 && offset + count <= total_tokens(),
                "read_tokens [" << offset << ", " << offset + count << ") outside the " << total_tokens() << " tokens");
  // the item holding `offset`, then item by item
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), offset);
  size_t i = static_cast<size_t>(it - offsets_.begin()) - 1;
  while (count > 0) {
    const int64_t within = offset - offsets_[i], n = std::min(count, offsets_[i + 1] - offset);
    base_->read_tokens(base_start_[i] + within, n, out);
    out += n;
    offset += n;
    count -= n;
    ++i;
  }
}

std::shared_ptr<const TokenStream> maybe_shorten(std::shared_ptr<const TokenStream> stream, const std::string& split,
                                                 const ShortenParams& p) {
  if (p.method == ShortenMethod::None || !shortens_split(p.split_list, split)) return stream;
  return std::make_shared<ShortenedTokenStream>(std::move(stream), p);
}

}  // namespace stretch::data
