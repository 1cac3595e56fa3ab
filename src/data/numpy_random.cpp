// data/numpy_random.cpp — see numpy_random.h.
#include "data/numpy_random.h"

namespace stretch::data {

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t v;
  if (max <= 0xffffffffull) {
    do v = static_cast<uint64_t>(mt_()) & mask; while (v > max);
  } else {
    do {
      const uint64_t hi = mt_(), lo = mt_();
      v = ((hi << 32) | lo) & mask;
    } while (v > max);
  }
  return v;
}

std::vector<int64_t> NumpyRandomState::permutation(int64_t n) {
  std::vector<int64_t> a(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = i;
  shuffle(a);
  return a;
}

double NumpyRandomState::random_sample() {
  const uint32_t a = static_cast<uint32_t>(mt_()) >> 5, b = static_cast<uint32_t>(mt_()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

}  // namespace stretch::data
