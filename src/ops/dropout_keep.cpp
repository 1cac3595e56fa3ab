// ops/dropout_keep.cpp — the one keep/drop decision used by dropout and attention dropout.
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

}  // namespace stretch::ops
