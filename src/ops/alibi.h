// ops/alibi.h — THE ALiBi slope function of stretch (REFERENCE.md §1.1, DESIGN.md §2).
// Contract: nothing else in the code base computes a slope. alibi_slopes(n) returns the n
// per-head slopes m_h of the ALiBi fork's get_slopes(n), bit for bit: each value is computed
// in double precision as start·ratio^i and rounded once to float.
//   n a power of two: m_h = 2^(-8(h+1)/n), h = 0..n-1.
//   otherwise, p = 2^floor(log2 n): slopes(p) followed by the first n−p elements of
//   slopes(2p) taken at even indices 0, 2, 4, … (NOT sorted; 6 heads give
//   [1/4, 1/16, 1/64, 1/256, 1/2, 1/8]).
// Throws stretch::Error (usage) for n < 1.
#pragma once
#include <vector>

namespace stretch::ops {

std::vector<float> alibi_slopes(int n_heads);  // [H]

}  // namespace stretch::ops
