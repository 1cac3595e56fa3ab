// --bf16 / --fp16 through the binary, on whatever CPU runs the tests. Without bf16 matmul
// (ops::bf16_matmul_supported(), e.g. Zen 3: AVX2, no AVX-512) train and eval-lm must refuse at
// startup with one usage error (exit 2) naming the flag, the CPU and the hint — before any data or
// checkpoint is read (the paths given do not exist) — instead of failing inside oneDNN at the
// first GEMM. With it, a tiny --bf16 training run and a --bf16 evaluation of its checkpoint work.
#include <gtest/gtest.h>

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
  EXPECT_NE(r.err.find("--bf16/--fp16: bf16 matmul is not supported on this CPU (" + ops::cpu_isa_summary() + ")"),
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
    for (const char* flag : {"--bf16", "--fp16"})
      expect_bf16_refused(run_stretch(tiny_train(nowhere, tmp / "ck", flag)), std::string("train ") + flag);
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

}  // namespace
}  // namespace stretch::cli
