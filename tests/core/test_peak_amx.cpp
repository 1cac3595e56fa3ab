// core/peak_amx.h: the AMX peak kernel really runs tile products (its result is the closed form of
// what it computes), and the peak measures it exactly where the CPU can run it. The oracle for
// "can run it" is /proc/cpuinfo and Linux's answer to the tile request, read here, not
// cpu_has_usable_amx(). No speed is asserted.
#include <gtest/gtest.h>

#include "core/peak_flops.h"
#include "cpu_flags.h"

namespace stretch {
namespace {

bool amx_here() { return kAmxBuilt && testing::amx_tiles_granted(); }

TEST(PeakAmx, UsableExactlyWhereTheCpuAndLinuxAllowIt) {
  EXPECT_EQ(cpu_has_usable_amx(cpu_info()), amx_here());
}

// Every A element 0.5 (bf16 0x3f00), every B element 0.25 (0x3e80): each round adds
// 32 · 0.5 · 0.25 = 4 to every accumulator element, so 1000 rounds give exactly 4000 (powers of two
// and integers below 2^24: exact in fp32). Other values: 3 · 1.5 (0x4040, 0x3fc0) · 32 · 7 rounds.
TEST(PeakAmx, TheChainComputesTileProducts) {
  if (!amx_here()) GTEST_SKIP() << "no AMX here (or Linux refused the tiles): the kernel cannot run";
  EXPECT_EQ(amx_chain(1000, 0x3f00, 0x3e80), 4000.0f);
  EXPECT_EQ(amx_chain(7, 0x4040, 0x3fc0), 7 * 32 * 4.5f);
  EXPECT_EQ(amx_chain(0, 0x4040, 0x3fc0), 0.0f);
}

TEST(PeakAmx, MeasuredExactlyWhereUsableAndBf16PeakIsItsThere) {
  const Peak p = measure_peak(cpu_info(), 2, 0.02);
  if (!amx_here()) {
    EXPECT_EQ(p.amx_1, -1);
    EXPECT_EQ(p.amx_n, -1);
    EXPECT_EQ(p.bf16_peak_1(), p.bf16_1);
    return;
  }
  EXPECT_GT(p.amx_1, 0);
  EXPECT_GT(p.amx_n, 0);
  EXPECT_EQ(p.bf16_peak_1(), p.amx_1);
  EXPECT_EQ(p.bf16_peak_n(), p.amx_n);
}

}  // namespace
}  // namespace stretch
