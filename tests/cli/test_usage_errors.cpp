// Unknown flags and stray arguments through the binary (issue 16): all of them in one error, in
// command-line order, each unknown flag with a "did you mean" from the subcommand's own flags, each
// stray or blank argument quoted; exit 2 before anything is read or written. CLI11 alone reported
// the first problem only (eval-lm: "--path is required" for a misspelt --pathh), listed extras
// last-first, and printed a blank argument as nothing.
#include <gtest/gtest.h>

#include <filesystem>

#include "train/train_test_util.h"

namespace stretch::cli {
namespace {

using train::testing::run_stretch;
using train::testing::RunResult;
using train::testing::TempDir;

size_t at(const std::string& hay, const std::string& needle) {
  const size_t p = hay.find(needle);
  EXPECT_NE(p, std::string::npos) << "missing: " << needle << "\nin:\n" << hay;
  return p;
}

TEST(UsageErrors, TrainReportsEveryUnknownFlagInOrderWithSuggestions) {
  TempDir tmp;
  const std::string save = tmp / "ck";
  const RunResult r = run_stretch({"train", "data-bin/none", "--lrr", "0.5", "--max-updat", "3", "stray", "",
                                   "--arch", "transformer_lm_tiny", "--max_epoch", "2", "--save-dir", save,
                                   "--no-such-thing"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("train: 6 unknown or unexpected arguments, in command-line order"), std::string::npos) << r.err;
  const size_t a = at(r.err, "--lrr: unknown flag; did you mean --lr?");
  const size_t b = at(r.err, "--max-updat: unknown flag; did you mean --max-update?");
  const size_t c = at(r.err, "'stray': unexpected argument (train takes 1 positional argument: data)");
  const size_t d = at(r.err, "'': a blank argument");
  const size_t e = at(r.err, "--max_epoch: unknown flag; did you mean --max-epoch?");
  const size_t f = at(r.err, "--no-such-thing: unknown flag\n");  // nothing close: no suggestion
  EXPECT_TRUE(a < b && b < c && c < d && d < e && e < f) << r.err;
  EXPECT_EQ(r.err.find("'0.5'"), std::string::npos) << "an unknown flag's value is not another problem:\n" << r.err;
  EXPECT_NE(r.err.find("stretch train --help"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(save));
}

// Seed 004 prints its commands on one line with " \\ " where the line breaks were; bash makes
// " --user-dir" of "pt \\ --user-dir" (and " " of "pt \\  --x").
TEST(UsageErrors, ASpaceBeforeAFlagPointsAtABackslashInsideALine) {
  const RunResult r = run_stretch({"eval-lm", "data-bin/none", "--path", "m.pt", " --user-dir", "x", " ",
                                   "--gen-subset", "test"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string hint = " (a '\\ ' inside a line? put each '\\' at the end of its line, or delete it)";
  const size_t a = at(r.err, "' --user-dir': a space before the flag" + hint);
  const size_t b = at(r.err, "'x': unexpected argument");
  const size_t c = at(r.err, "' ': a space before nothing" + hint);
  EXPECT_TRUE(a < b && b < c) << r.err;
  const RunResult e = run_stretch({"eval-lm", "data-bin/none", "--path", "m.pt", "", " stray"});
  at(e.err, "'': a blank argument (an empty variable, or a stray quote or space?)");
  at(e.err, "' stray': unexpected argument");
}

TEST(UsageErrors, EvalLmNamesTheMisspeltFlagNotTheRequiredOne) {
  const RunResult r = run_stretch({"eval-lm", "data-bin/none", "--pathh", "x.pt", "--gen-subst", "valid"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  at(r.err, "--pathh: unknown flag; did you mean --path?");
  at(r.err, "--gen-subst: unknown flag; did you mean --gen-subset?");
  EXPECT_EQ(r.err.find("is required"), std::string::npos) << r.err;
}

TEST(UsageErrors, KnownFlagsValuesAndListsAreNotReported) {
  // Values that look odd (negative numbers, a Python tuple, list options, --flag=value) are values.
  const RunResult r = run_stretch({"train", "data-bin/none", "--lr", "0.5", "--keep-last-epochs", "-1", "--adam-betas",
                                   "(0.9, 0.98)", "--max-update=3", "--no-save", "--dump-config"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A list option (--path, --lengths) takes every following non-flag argument, as CLI11 does.
  const RunResult s = run_stretch({"sweep", "data-bin/none", "extra", "--path", "a.pt,b.pt", "--lengths", "16,32",
                                   "--lenghts", "64"});
  EXPECT_EQ(s.exit_code, 2) << s.err;
  const size_t a = at(s.err, "'extra': unexpected argument");
  const size_t b = at(s.err, "--lenghts: unknown flag; did you mean --lengths?");
  EXPECT_LT(a, b);
  EXPECT_NE(s.err.find("sweep: 2 unknown"), std::string::npos) << s.err;
}

// The environment settings of the matrix products (ops/gemm.h, ops/linear.h) are checked at startup:
// a bad value is one usage error naming the variable, the value and the accepted ones, before any
// data is read or any product is computed.
TEST(UsageErrors, BadGemmSettingsInTheEnvironmentAreUsageErrors) {
  TempDir tmp;
  const std::string save = tmp / "ck";
  for (const auto& [var, accepted] : {std::pair<std::string, std::string>{"STRETCH_GEMM", "onednn, mixed or openblas"},
                                      {"STRETCH_LINEAR_BACKWARD", "sequential or concurrent"}}) {
    const RunResult r = run_stretch({"train", "data-bin/none", "--save-dir", save}, {{var, "fastest"}});
    EXPECT_EQ(r.exit_code, 2) << var << ": " << r.err;
    EXPECT_NE(r.err.find(var + "=fastest is not a"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(accepted), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(save)) << var;
  }
  for (const char* value : {"sequential", "concurrent"}) {  // the accepted values run (info reads no data)
    const RunResult r = run_stretch({"info"}, {{"STRETCH_LINEAR_BACKWARD", value}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("linear backward with 2 threads: ") + value), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace stretch::cli
