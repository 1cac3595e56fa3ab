// ops/dropout_keep.cpp — the one keep/drop decision used by dropout and attention dropout.
#include <algorithm>

#include "core/rng.h"
#include "ops/dropout.h"

namespace stretch::ops {

uint32_t dropout_keep4(const DropoutParams& p, int64_t block) {
  // One Philox call yields 4 words; element 4·block + j uses word j.
  auto r = philox4x32(p.seed, p.stream, static_cast<uint64_t>(block));
  uint32_t bits = 0;
  for (int j = 0; j < 4; ++j) bits |= static_cast<uint32_t>(uint_to_unit_float(r[j]) >= p.p) << j;
  return bits;
}

bool dropout_keep(const DropoutParams& p, int64_t i) { return (dropout_keep4(p, i >> 2) >> (i & 3)) & 1u; }

void dropout_factors(const DropoutParams& p, int64_t i0, int64_t n, float* z) {
  constexpr int64_t kBlocks = 64;  // Philox blocks per chunk: 256 words on the stack
  alignas(64) uint32_t words[kBlocks * 4];
  const float inv = 1.f / (1.f - p.p), thr = p.p;
  int64_t k = 0;
  while (k < n) {
    const int64_t i = i0 + k, blk = i >> 2, skip = i & 3;
    const int64_t take = std::min<int64_t>(n - k, kBlocks * 4 - skip);
    philox4x32_blocks(p.seed, p.stream, static_cast<uint64_t>(blk), (skip + take + 3) / 4, words);
    const uint32_t* w = words + skip;
    float* out = z + k;
#pragma omp simd
    for (int64_t e = 0; e < take; ++e)
      out[e] = static_cast<float>(w[e] >> 8) * (1.0f / 16777216.0f) >= thr ? inv : 0.f;  // uint_to_unit_float
    k += take;
  }
}

}  // namespace stretch::ops
