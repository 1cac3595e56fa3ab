// The sweep plot's script (eval/sweep_report.h): the training length stays a visible line inside
// the frame even when it is the smallest (or largest) evaluated length (issue 16: the dashed line
// sat on the left border and its label covered the first point), its label sits above the frame,
// and the title's second line says the split and protocol. The image itself was looked at
// (docs/eval.md); through the binary, EvalCli.SweepWritesTableCsvJsonAndPlots checks the SVG.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "eval/sweep_report.h"

namespace stretch::eval {
namespace {

SweepRow row(const std::string& label, int64_t train, std::vector<int64_t> lengths) {
  SweepRow r;
  r.label = label;
  r.train_length = train;
  for (int64_t L : lengths) r.cells.push_back({.length = L, .ppl = 100.0 + static_cast<double>(L), .loss2 = 0, .tokens = 1, .note = {}});
  return r;
}

TEST(SweepPlot, TrainingLengthAtTheSmallestLengthIsInsideTheFrame) {
  const std::vector<SweepRow> rows = {row("alibi L=64", 64, {64, 128, 256}), row("rope L=64", 64, {64, 128, 256})};
  const std::string gp = sweep_plot_script(rows, "PTB", "perplexity on the 'valid' split, non-overlapping", "d.dat", {0, 1});
  double lo = 0, hi = 0;
  const size_t at = gp.find("set xrange [");
  ASSERT_NE(at, std::string::npos) << gp;
  ASSERT_EQ(std::sscanf(gp.c_str() + at, "set xrange [%lf:%lf]", &lo, &hi), 2) << gp;
  // At least a fifth of an octave between the frame and the outermost lengths (log-2 axis).
  EXPECT_LT(lo, 64 / std::pow(2.0, 0.2));
  EXPECT_GT(hi, 256 * std::pow(2.0, 0.2));
  EXPECT_GT(lo, 32.0);  // and not a wasted octave
  // One dashed line per training length, its label above the frame (graph 1, offset upwards).
  EXPECT_NE(gp.find("set arrow from 64, graph 0 to 64, graph 1 nohead dashtype 2"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set label 'train L=64' at 64, graph 1 center offset 0,0.7"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("set arrow", gp.find("set arrow") + 1), std::string::npos) << "marked twice:\n" << gp;
  // The title's second line: split and protocol.
  EXPECT_NE(gp.find("set title \"PTB\\nperplexity on the 'valid' split, non-overlapping\""), std::string::npos) << gp;
}

TEST(SweepPlot, TrainingLengthOutsideTheEvaluatedLengthsWidensTheRange) {
  const std::string gp = sweep_plot_script({row("alibi L=512", 512, {64, 128})}, "t", "", "d.dat", {0});
  double lo = 0, hi = 0;
  ASSERT_EQ(std::sscanf(gp.c_str() + gp.find("set xrange ["), "set xrange [%lf:%lf]", &lo, &hi), 2) << gp;
  EXPECT_LT(lo, 64.0);
  EXPECT_GT(hi, 512.0);
  EXPECT_NE(gp.find("set title \"t\""), std::string::npos) << gp;
}

}  // namespace
}  // namespace stretch::eval
