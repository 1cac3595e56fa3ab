// The eval tests run tiny models (C 32), where OpenMP threads only add synchronisation; on a
// shared, oversubscribed host libgomp's spin-waiting made them ~500x slower with 2 threads
// (26 s instead of 40 ms for one test). Every test process of test_eval uses one thread; the
// binary's tests pass --threads 1 as well. The kernels' threaded paths are tested in tests/ops.
#include <gtest/gtest.h>

#include "core/threads.h"

namespace {
struct OneThread : ::testing::Environment {
  void SetUp() override { stretch::set_num_threads(1); }
};
[[maybe_unused]] const auto* const kOneThread = ::testing::AddGlobalTestEnvironment(new OneThread);
}  // namespace
