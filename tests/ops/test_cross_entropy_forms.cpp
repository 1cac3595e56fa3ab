// tests/ops/test_cross_entropy_forms.cpp — training's fused in-place cross-entropy in its two
// forms: InplaceForm::Softmax (forward leaves the softmax, backward only fixes the targets) must
// give bitwise the gradient, loss and inv_sum of InplaceForm::Exp (forward leaves exp(x − max),
// backward multiplies by dloss·inv_sum) at dloss = 1, the summed loss training backpropagates.
// Tolerance against the reference for other dloss values is in op_cases_ce_pos.cpp. Threaded
// (n·V above the parallel threshold) and serial shapes, with ignored rows, under 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "ops/cross_entropy.h"
#include "ops/cross_entropy_softmax.h"
#include "ops/op_test_registry.h"

namespace stretch::ops {
namespace {

struct Shape {
  int64_t n, v;
};

TEST(CrossEntropyInplaceForms, SoftmaxFormIsBitwiseTheExpFormAtUnitDloss) {
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (Shape s : {Shape{5, 17}, Shape{64, 2049}, Shape{300, 10008}}) {
      const CrossEntropyDims d{.n = s.n, .v = s.v, .ignore_index = 1, .reduction = Reduction::Sum};
      std::vector<float> logits = testing::random_floats(s.n * s.v, 77 + s.n, -8.f, 8.f);
      std::vector<int32_t> targets = testing::random_ids(s.n, static_cast<int32_t>(s.v), 78 + s.n);
      for (int64_t n = 0; n < s.n; n += 4) targets[n] = d.ignore_index;
      std::vector<float> xa = logits, xb = logits, ia(s.n), ib(s.n), la(s.n), lb(s.n);
      const CrossEntropyResult ra =
          cross_entropy_forward_inplace(xa.data(), ia.data(), la.data(), nullptr, targets.data(), d, InplaceForm::Exp);
      const CrossEntropyResult rb = cross_entropy_forward_inplace(xb.data(), ib.data(), lb.data(), nullptr,
                                                                  targets.data(), d, InplaceForm::Softmax);
      EXPECT_EQ(ra.loss, rb.loss);
      EXPECT_EQ(ra.count, rb.count);
      EXPECT_EQ(0, std::memcmp(ia.data(), ib.data(), ia.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
      cross_entropy_backward_inplace(xa.data(), ia.data(), targets.data(), 1.f, ra.count, d, InplaceForm::Exp);
      cross_entropy_backward_inplace(xb.data(), ib.data(), targets.data(), 1.f, rb.count, d, InplaceForm::Softmax);
      EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float)))
          << "n=" << s.n << " v=" << s.v << " threads " << threads;
    }
  }
  set_num_threads(saved);
}

TEST(CrossEntropyInplaceForms, SoftmaxFormRefusesMean) {
  const CrossEntropyDims d{.n = 2, .v = 3, .ignore_index = -1, .reduction = Reduction::Mean};
  std::vector<float> x(6, 0.f), inv(2);
  std::vector<int32_t> t{0, 2};
  EXPECT_THROW(cross_entropy_forward_inplace(x.data(), inv.data(), nullptr, nullptr, t.data(), d, InplaceForm::Softmax),
               Error);
}

}  // namespace
}  // namespace stretch::ops
