// ops/alibi.cpp — alibi_slopes(): the fork's get_slopes (REFERENCE.md §1.1) in double, rounded
// to float once per element.
#include "ops/alibi.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace stretch::ops {
namespace {

// get_slopes_power_of_2(n): start = 2^(-2^-(log2(n) - 3)), ratio = start, [start·ratio^i].
void slopes_power_of_2(int n, std::vector<double>& out) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
  for (int i = 0; i < n; ++i) out.push_back(start * std::pow(start, i));
}

void slopes_any(int n, std::vector<double>& out) {
  int p = 1;
  while (p * 2 <= n) p *= 2;  // 2^floor(log2 n)
  if (p == n) return slopes_power_of_2(n, out);
  slopes_power_of_2(p, out);
  std::vector<double> twice;
  slopes_any(2 * p, twice);
  for (int i = 0; i < n - p; ++i) out.push_back(twice[2 * i]);  // [0::2][:n-p]
}

}  // namespace

std::vector<float> alibi_slopes(int n_heads) {
  if (n_heads < 1)
    fail_usage("alibi_slopes: the number of attention heads must be >= 1 (got " + std::to_string(n_heads) + ")",
               "set --decoder-attention-heads to a positive count");
  std::vector<double> d;
  d.reserve(n_heads);
  slopes_any(n_heads, d);
  return std::vector<float>(d.begin(), d.end());
}

}  // namespace stretch::ops
