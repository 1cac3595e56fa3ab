// --bf16 / --fp16 through the binary, on whatever CPU runs the tests. Without bf16 matmul
// (ops::bf16_matmul_supported(), e.g. Zen 3: AVX2, no AVX-512) train and eval-lm refuse --bf16 at
// startup with one usage error (exit 2) naming the flag, the CPU and the hint — before any data or
// checkpoint is read (the paths given do not exist) — instead of failing inside oneDNN at the
// first GEMM; fairseq's --fp16 (in the commands users copy) trains in fp32 with one warning and
// the same losses as no flag. With bf16 matmul, a tiny --bf16 training run and a --bf16
// evaluation of its checkpoint work.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ops/gemm.h"
#include "train/train_test_util.h"

namespace stretch::cli {
namespace {

using train::testing::make_data_bin;
using train::testing::run_stretch;
using train::testing::RunResult;
using train::testing::TempDir;

std::vector<std::string> tiny_train(const std::string& data, const std::string& save_dir, const std::string& flag) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
          "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--max-update", "2", "--threads", "1",
          "--no-progress-bar", "--save-dir", save_dir, flag};
}

void expect_bf16_refused(const RunResult& r, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--bf16: bf16 matmul is not supported on this CPU (" + ops::cpu_isa_summary() + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(std::string("hint: ") + ops::kBf16Hint), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("oneDNN matmul failed"), std::string::npos) << "refused before any GEMM: " << r.err;
  EXPECT_EQ(r.err.find("no-such"), std::string::npos) << "refused before touching the data: " << r.err;
  EXPECT_EQ(r.err.find("bug in stretch"), std::string::npos) << r.err;
}

TEST(Bf16Flag, RefusedAtStartupWithoutBf16MatmulElseTrainsAndEvaluates) {
  TempDir tmp;
  if (!ops::bf16_matmul_supported()) {
    const std::string nowhere = tmp / "no-such-data-bin";
    expect_bf16_refused(run_stretch(tiny_train(nowhere, tmp / "ck", "--bf16")), "train --bf16");
    // --fp16: fp32 with a warning, bit for bit the run without the flag.
    const std::string data = make_data_bin(tmp);
    const RunResult fp16 = run_stretch(tiny_train(data, tmp / "ck16", "--fp16"));
    const RunResult fp32 = run_stretch(tiny_train(data, tmp / "ck32", "--log-format=simple"));  // the default
    ASSERT_EQ(fp16.exit_code, 0) << fp16.err;
    ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
    EXPECT_NE(fp16.err.find("--fp16: bf16 matmul is not supported on this CPU"), std::string::npos) << fp16.err;
    EXPECT_NE(fp16.err.find("computing in fp32"), std::string::npos) << fp16.err;
    auto losses = [](const std::string& out) {
      std::string l;
      for (size_t p = out.find("loss "); p != std::string::npos; p = out.find("loss ", p + 1))
        l += out.substr(p, out.find(' ', p + 5) - p) + ";";
      return l;
    };
    EXPECT_FALSE(losses(fp16.out).empty()) << fp16.out;
    EXPECT_EQ(losses(fp16.out), losses(fp32.out));
    expect_bf16_refused(run_stretch({"eval-lm", nowhere, "--path", tmp / "no-such.pt", "--threads", "1", "--bf16"}),
                        "eval-lm --bf16");
    // Without the flag the same CPU trains as ever (fp32).
    const RunResult info = run_stretch({"info"});
    EXPECT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("bf16 matmul: not supported (" + ops::cpu_isa_summary() + ")"), std::string::npos)
        << info.out;
    if (HasFailure()) return;
    GTEST_SKIP() << "bf16 matmul not supported on this CPU (" << ops::cpu_isa_summary()
                 << "): checked the startup refusal; --bf16 training not run";
  }
  const std::string data = make_data_bin(tmp);
  const RunResult tr = run_stretch(tiny_train(data, tmp / "ck", "--bf16"));
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  const RunResult ev = run_stretch({"eval-lm", data, "--path", tmp / "ck/checkpoint_last.pt", "--gen-subset", "valid",
                                    "--threads", "1", "--bf16"});
  EXPECT_EQ(ev.exit_code, 0) << ev.err;
  const RunResult info = run_stretch({"info"});
  EXPECT_NE(info.out.find("bf16 matmul: supported"), std::string::npos) << info.out;
}

// `stretch info` measures one thread's fp32 FMA and bf16 dot-product rates and says when --bf16's
// products are slower (an Intel Xeon without AMX: 0.5×). The oracle for which line must appear is
// /proc/cpuinfo read here, not the code under test; the ratio must be the two printed rates'.
bool cpuinfo_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

TEST(InfoPeak, PrintsFp32AndBf16RatesAndTheirRatio) {
  const RunResult info = run_stretch({"info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(info.out, m,
                                std::regex(R"(peak, 1 thread, measured now: fp32 FMA ([0-9.]+) GFLOP/s \((zmm|ymm)\))")))
      << info.out;
  const double fp32 = std::stod(m[1]);
  EXPECT_GT(fp32, 1.0);
  if (m[2] == "zmm") {
    EXPECT_TRUE(cpuinfo_has_flag("avx512f")) << "zmm only where the CPU has avx512f";
  }
  if (!cpuinfo_has_flag("avx512_bf16")) {
    EXPECT_NE(info.out.find("bf16 dot product: none (no avx512_bf16)"), std::string::npos) << info.out;
    return;
  }
  ASSERT_TRUE(std::regex_search(info.out, m,
                                std::regex(R"(bf16 dot product ([0-9.]+) GFLOP/s = ([0-9.]+)x fp32( \(--bf16's products are slower than fp32's on this CPU\))?)")))
      << info.out;
  const double bf16 = std::stod(m[1]), ratio = std::stod(m[2]);
  EXPECT_GT(bf16, 1.0);
  EXPECT_NEAR(ratio, bf16 / fp32, 0.01) << info.out;
  if (std::fabs(ratio - 1) > 0.01) {  // (printed to 2 decimals: 1.00 may be either side)
    EXPECT_EQ(m[3].matched, ratio < 1) << "the warning exactly when bf16 is slower: " << info.out;
  }
}

}  // namespace
}  // namespace stretch::cli
