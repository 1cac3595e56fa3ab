// dist::grad_buckets (the layout of the bucketed all-reduce) and BucketAllreduce in a world of
// size 1 (no MPI call, gradients untouched). The multi-rank sums: tests/dist/mpi_bucket_sum.sh.
#include <gtest/gtest.h>

#include "dist/bucket_allreduce.h"
#include "dist/grad_buckets.h"

namespace stretch::dist {
namespace {

TEST(GradBuckets, ReverseOrderClosedAtTheCap) {
  // 4-byte floats: sizes in bytes 40, 400, 4, 8, 4000; cap 404 bytes.
  const std::vector<GradBucket> b = grad_buckets({10, 100, 1, 2, 1000}, 404);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{4}));  // the last parameter alone: over the cap by itself
  EXPECT_EQ(b[0].numel, 1000);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{3, 2, 1}));  // 8 + 4 + 400 = 412 >= 404 closes it
  EXPECT_EQ(b[2].params, (std::vector<size_t>{0}));        // the rest: a last, smaller bucket
}

TEST(GradBuckets, EveryParameterOnceWithOffsets) {
  const std::vector<int64_t> n = {10, 100, 1, 2, 1000, 7};
  for (int64_t cap : {int64_t{0}, int64_t{16}, int64_t{404}, int64_t{1} << 30}) {
    const std::vector<GradBucket> b = grad_buckets(n, cap);
    std::vector<int> seen(n.size(), 0);
    size_t expect_next = n.size();  // reverse registration order across buckets
    for (const GradBucket& bk : b) {
      int64_t off = 0;
      for (size_t i = 0; i < bk.params.size(); ++i) {
        EXPECT_EQ(bk.params[i], --expect_next);
        EXPECT_EQ(bk.offset[i], off);
        off += n[bk.params[i]];
        ++seen[bk.params[i]];
      }
      EXPECT_EQ(bk.numel, off);
    }
    for (int s : seen) EXPECT_EQ(s, 1);
    if (cap == 0) {
      EXPECT_EQ(b.size(), n.size());
    }
    if (cap == int64_t{1} << 30) {
      EXPECT_EQ(b.size(), 1u);
    }
  }
  const std::vector<GradBucket> b = grad_buckets(n, 404);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{5, 4}));
  EXPECT_EQ(b[1].params, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(b[2].params, (std::vector<size_t>{0}));
}

TEST(BucketAllreduce, WorldOfOneLeavesGradientsAlone) {
  if (World::get().size() != 1) GTEST_SKIP() << "run without mpirun";
  std::vector<float> a = {1, 2, 3}, b = {-4, 5};
  BucketAllreduce r(World::get(), {{.grad = a.data(), .numel = 3}, {.grad = b.data(), .numel = 2}}, 0);
  EXPECT_EQ(r.num_buckets(), 2u);
  r.begin();
  r.ready(1);
  r.poll();
  r.finish();
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(b, (std::vector<float>{-4, 5}));
}

}  // namespace
}  // namespace stretch::dist
