// tests/harness/probe/setup_failure_probe.cpp — not a test of stretch: a gtest binary whose first
// suite's SetUpTestSuite throws and whose second suite skips genuinely, run by
// harness_setup_failure_is_not_a_skip (tests/harness/CMakeLists.txt) to check tests/gtest_main.cpp.
#include <gtest/gtest.h>

#include <stdexcept>

namespace {

class BrokenFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { throw std::runtime_error("a data file the fixture needs is missing"); }
};

TEST_F(BrokenFixture, NeverRuns) { ADD_FAILURE() << "the body ran although SetUpTestSuite threw"; }

TEST(Genuine, SkipsOnPurpose) { GTEST_SKIP() << "this CPU cannot run it"; }

}  // namespace
