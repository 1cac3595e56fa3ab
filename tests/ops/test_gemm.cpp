#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "ops/gemm.h"

namespace stretch::ops {

// fp32 GEMM vs a double-accumulating reference: relative error bound grows like K·eps;
// 1e-4 relative to the row's magnitude covers K up to ~1000 with margin (eps = 6e-8).
TEST(Gemm, MatchesReferenceAllTransposes) {
  Rng rng(1);
  for (int64_t m : {1, 7, 64}) for (int64_t n : {1, 5, 33}) for (int64_t k : {1, 3, 130}) {
    for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes}) {
      std::vector<float> a(m * k), b(k * n), c(m * n), r(m * n);
      for (auto& x : a) x = rng.uniform(-1, 1);
      for (auto& x : b) x = rng.uniform(-1, 1);
      for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
      GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 0.5f, .beta = 1.0f};
      gemm(p, a.data(), b.data(), c.data());
      gemm_reference(p, a.data(), b.data(), r.data());
      for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << n << k;
    }
  }
}

}  // namespace stretch::ops
