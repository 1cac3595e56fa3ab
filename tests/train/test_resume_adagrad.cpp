// Adaptive Span's optimizer and schedule through the binary (issue 14): `--optimizer
// adagrad_with_grad_clip --adagrad-clip 0.03 --lr-scheduler fixed --warmup-updates 6 --lr 0.07`
// (the seed 004 flags with a short warmup). Checks that
//   * the lr fairseq logs after update n is fixed's lr_at(n) = 0.07·min(1, (n+1)/6), worked out
//     by hand below;
//   * a run stopped by SIGTERM mid-warmup and restarted from checkpoint_last continues with
//     bit-identical log lines and ends with bit-identical weights and optimizer state (the
//     Adagrad accumulators "optimizer.<param>.sum" and step counts included).
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include "tensor/safetensors.h"
#include "train/checkpoint.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

// The training log fields compared update by update (update_lines).
const std::vector<std::string> kLogFields = {"epoch", "loss", "lr", "gnorm", "wpb"};

using namespace testing;

std::vector<std::string> adagrad_args(const std::string& data, const std::string& save_dir) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2", "--decoder-embed-dim", "32",
          "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--optimizer", "adagrad_with_grad_clip",
          "--adagrad-clip", "0.03", "--lr-scheduler", "fixed", "--warmup-updates", "6", "--lr", "0.07",
          "--max-update", "14", "--save-interval-updates", "4", "--seed", "3", "--log-format", "json",
          "--log-full-precision", "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir", save_dir};
}

TEST(ResumeAdagradWithGradClip, FixedWarmupLrAndBitExactResume) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 60);
  const RunResult ref = run_stretch(adagrad_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ref_lines = update_lines(ref.out, kLogFields);
  ASSERT_EQ(ref_lines.size(), 14u) << ref.out;
  ASSERT_GE(ref_lines.at(14).at("epoch").get<int64_t>(), 2) << "the run should cross an epoch boundary";
  // Logged after update n: lr_at(n) = 0.07·(n+1)/6 while n < 6, then 0.07.
  //   n = 1: 0.07·2/6 = 0.0233333…;  n = 3: 0.07·4/6 = 0.0466666…;  n = 5: 0.07·6/6 = 0.07;  n ≥ 6: 0.07
  EXPECT_NEAR(ref_lines.at(1).at("lr").get<double>(), 0.07 * 2 / 6, 1e-15);
  EXPECT_NEAR(ref_lines.at(3).at("lr").get<double>(), 0.07 * 4 / 6, 1e-15);
  EXPECT_NEAR(ref_lines.at(5).at("lr").get<double>(), 0.07, 1e-15);
  EXPECT_NEAR(ref_lines.at(12).at("lr").get<double>(), 0.07, 1e-15);
  EXPECT_LT(ref_lines.at(14).at("loss").get<double>(), ref_lines.at(1).at("loss").get<double>());

  // The checkpoint holds Adagrad's accumulators under the optimizer's name.
  const SafetensorsFile ck = load_safetensors(dir / "ref/checkpoint_last.pt");
  EXPECT_NE(ck.metadata.at("optimizer").find("adagrad_with_grad_clip"), std::string::npos);
  int sums = 0;
  for (const auto& [name, t] : ck.tensors) sums += name.size() > 4 && name.compare(name.size() - 4, 4, ".sum") == 0;
  EXPECT_GT(sums, 0);

  // Stop at update 5 (mid-warmup, between the interval checkpoints at 4 and 8) with SIGTERM,
  // which saves checkpoint_last at 5; resume with the same command.
  const std::string save = dir / "stopped";
  {
    Child c(adagrad_args(data, save), {{"STRETCH_TEST_STALL_AT_UPDATE", "5"}});
    ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 5"));
    c.signal(SIGTERM);
    const RunResult r = c.wait();
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    for (const auto& [n, v] : update_lines(r.out, kLogFields))
      EXPECT_EQ(v, ref_lines.at(n)) << "stopped run, update " << n;
  }
  EXPECT_EQ(read_checkpoint(save + "/checkpoint_last.pt").state.num_updates, 5);
  const RunResult resumed = run_stretch(adagrad_args(data, save));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto lines = update_lines(resumed.out, kLogFields);
  EXPECT_EQ(lines.size(), 9u);  // updates 6..14
  for (const auto& [n, v] : lines) EXPECT_EQ(v, ref_lines.at(n)) << "resumed run, update " << n;

  const SafetensorsFile a = load_safetensors(save + "/checkpoint_last.pt");
  const SafetensorsFile b = load_safetensors(dir / "ref/checkpoint_last.pt");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const Tensor* u = b.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << "tensor " << name << " differs";
  }
  EXPECT_EQ(a.metadata.at("optimizer"), b.metadata.at("optimizer"));
  EXPECT_EQ(a.metadata.at("train_state"), b.metadata.at("train_state"));
}

}  // namespace
}  // namespace stretch::train
