// data/numpy_random.h — numpy's legacy RandomState (MT19937) permutation and shuffle.
// Contract: NumpyRandomState(seed) gives exactly the numbers np.random.seed(seed) gives:
// permutation(n) == np.random.permutation(n) and shuffle() == np.random.shuffle() element for
// element (Fisher-Yates from the back, j from numpy's masked rejection sampler
// random_interval). fairseq orders blocks and shuffles batches with these calls under
// numpy_seed(seed) and numpy_seed(seed + epoch), so stretch reproduces fairseq's batch order
// exactly (tests/data/test_batching.cpp checks against values printed by numpy 1.24).
// The generator is std::mt19937, whose seeding and output are numpy's mt19937_seed/next32.
// This is the only use of MT19937 in stretch; everything else draws from core/rng.h (Philox).
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace stretch::data {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  // numpy random_interval(max): uniform in [0, max] by masked rejection.
  uint64_t interval(uint64_t max);
  std::vector<int64_t> permutation(int64_t n);
  // np.random.rand() / random_sample(): (next32 >> 5, next32 >> 6) as a 53-bit double in [0, 1).
  double random_sample();
  template <class T>
  void shuffle(std::vector<T>& x) {
    for (int64_t i = static_cast<int64_t>(x.size()) - 1; i >= 1; --i) {
      const auto j = static_cast<size_t>(interval(static_cast<uint64_t>(i)));
      std::swap(x[static_cast<size_t>(i)], x[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace stretch::data
