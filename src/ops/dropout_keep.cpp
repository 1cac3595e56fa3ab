// ops/dropout_keep.cpp — the one keep/drop decision used by dropout and attention dropout.
#include "core/rng.h"
#include "ops/dropout.h"

namespace stretch::ops {

bool dropout_keep(const DropoutParams& p, int64_t i) {
  // One Philox call yields 4 words; element i uses word i % 4 of block i / 4.
  auto r = philox4x32(p.seed, p.stream, static_cast<uint64_t>(i) >> 2);
  return uint_to_unit_float(r[i & 3]) >= p.p;
}

}  // namespace stretch::ops
