// `stretch train --optimizer adafactor` through the binary (issue 16). Checks that
//   * a tiny transformer_lm trains (the loss falls) with --beta1 0.9 --scale-parameter
//     --weight-decay 0.01 and a warmed-up fixed schedule;
//   * checkpoint_last holds fairseq's Adafactor state per parameter with its shape: factored
//     rows [out] and columns [in] for a Linear weight [out, in] (fc1: [64, 32] -> 64 and 32),
//     [V] and [C] for the embedding [V, C], exp_avg_sq [C] for a LayerNorm vector, exp_avg [N]
//     for each (the first moment); `stretch info` names the optimizer and its settings;
//   * a run killed with SIGKILL at update 11 (after the interval checkpoint at 8 and the end of
//     epoch 1) and restarted from checkpoint_last continues with bit-identical log lines and ends with bit-identical weights
//     and optimizer state;
//   * the adafactor flag errors (fairseq's refusals and out-of-range values): exit 2 and one
//     message naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
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

std::vector<std::string> adafactor_args(const std::string& data, const std::string& save_dir) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2", "--decoder-embed-dim", "32",
          "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--optimizer", "adafactor", "--beta1", "0.9",
          "--scale-parameter", "--weight-decay", "0.01", "--lr-scheduler", "fixed", "--warmup-updates", "4",
          "--lr", "0.5", "--max-update", "16", "--save-interval-updates", "8", "--seed", "3", "--log-format", "json",
          "--log-full-precision", "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir", save_dir};
}

int64_t numel_of(const SafetensorsFile& f, const std::string& name) {
  const Tensor* t = f.find(name);
  return t ? t->numel() : -1;
}

TEST(AdafactorTrain, LossFallsStateHasShapesAndKillNineResumeIsExact) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 60);
  const RunResult ref = run_stretch(adafactor_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ref_lines = update_lines(ref.out, kLogFields);
  ASSERT_EQ(ref_lines.size(), 16u) << ref.out;
  EXPECT_LT(ref_lines.at(16).at("loss").get<double>(), ref_lines.at(1).at("loss").get<double>() - 0.5);
  // The logged lr is the schedule's (fairseq logs what step_update set): 0.5·(n+1)/4, then 0.5.
  EXPECT_NEAR(ref_lines.at(1).at("lr").get<double>(), 0.5 * 2 / 4, 1e-15);
  EXPECT_NEAR(ref_lines.at(10).at("lr").get<double>(), 0.5, 1e-15);

  const SafetensorsFile ck = load_safetensors(dir / "ref/checkpoint_last.pt");
  EXPECT_NE(ck.metadata.at("optimizer").find("\"adafactor\""), std::string::npos);
  const std::string fc1 = "optimizer.decoder.layers.0.fc1.weight.";  // Linear [out 64, in 32]
  EXPECT_EQ(numel_of(ck, fc1 + "exp_avg_sq_row"), 64);
  EXPECT_EQ(numel_of(ck, fc1 + "exp_avg_sq_col"), 32);
  EXPECT_EQ(numel_of(ck, fc1 + "exp_avg"), 64 * 32);
  EXPECT_EQ(numel_of(ck, fc1 + "exp_avg_sq"), -1);
  const Tensor* emb = ck.find("decoder.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  ASSERT_EQ(emb->shape().rank(), 2);
  EXPECT_EQ(numel_of(ck, "optimizer.decoder.embed_tokens.weight.exp_avg_sq_row"), emb->shape()[0]);  // V
  EXPECT_EQ(numel_of(ck, "optimizer.decoder.embed_tokens.weight.exp_avg_sq_col"), emb->shape()[1]);  // C
  EXPECT_EQ(numel_of(ck, "optimizer.decoder.layers.0.final_layer_norm.weight.exp_avg_sq"), 32);
  EXPECT_EQ(numel_of(ck, "optimizer.decoder.layers.0.final_layer_norm.weight.exp_avg_sq_row"), -1);

  const RunResult info = run_stretch({"info", dir / "ref/checkpoint_last.pt"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("optimizer: adafactor {"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\"scale_parameter\":true"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\"beta1\":0.9"), std::string::npos) << info.out;

  // SIGKILL at update 11 (no chance to save): the restart begins at the interval checkpoint of
  // update 8, or at the end-of-epoch checkpoint if epoch 1 ended later (before 11).
  int64_t e1 = 0;
  for (const auto& [n, v] : ref_lines)
    if (v.at("epoch").get<int64_t>() == 1) e1 = n;
  const int64_t expected = std::max<int64_t>(8, e1 < 11 ? e1 : 0);
  const std::string save = dir / "killed";
  {
    Child c(adafactor_args(data, save), {{"STRETCH_TEST_STALL_AT_UPDATE", "11"}});
    ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 11"));
    c.signal(SIGKILL);
    const RunResult r = c.wait();
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
    for (const auto& [n, v] : update_lines(r.out, kLogFields))
      EXPECT_EQ(v, ref_lines.at(n)) << "killed run, update " << n;
  }
  EXPECT_EQ(read_checkpoint(save + "/checkpoint_last.pt").state.num_updates, expected);
  const RunResult resumed = run_stretch(adafactor_args(data, save));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto lines = update_lines(resumed.out, kLogFields);
  EXPECT_EQ(static_cast<int64_t>(lines.size()), 16 - expected);  // updates expected+1..16
  for (const auto& [n, v] : lines) EXPECT_EQ(v, ref_lines.at(n)) << "resumed run, update " << n;

  const SafetensorsFile a = load_safetensors(save + "/checkpoint_last.pt");
  ASSERT_EQ(a.tensors.size(), ck.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const Tensor* u = ck.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << "tensor " << name << " differs";
  }
  EXPECT_EQ(a.metadata.at("optimizer"), ck.metadata.at("optimizer"));
  EXPECT_EQ(a.metadata.at("train_state"), ck.metadata.at("train_state"));
}

TEST(AdafactorTrain, BadFlagsAreUsageErrorsNamingTheFlag) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 20);
  struct Case {
    std::vector<std::string> flags;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--optimizer", "adafactor", "--clip-threshold", "0"}, "--clip-threshold 0: must be finite and > 0"},
      {{"--optimizer", "adafactor", "--clip-threshold", "-1"}, "--clip-threshold -1"},
      {{"--optimizer", "adafactor", "--decay-rate", "0.5"}, "--decay-rate 0.5: must be < 0"},
      {{"--optimizer", "adafactor", "--decay-rate", "0"}, "--decay-rate 0"},
      {{"--optimizer", "adafactor", "--adafactor-eps", "(1e-30)"}, "--adafactor-eps \"(1e-30)\": needs two numbers"},
      {{"--optimizer", "adafactor", "--adafactor-eps", "(1e-30, -1)"}, "--adafactor-eps \"(1e-30, -1)\": each eps must be >= 0"},
      {{"--optimizer", "adafactor", "--adafactor-eps", "(1e-30, x)"}, "--adafactor-eps \"(1e-30, x)\": 'x' is not a finite number"},
      {{"--optimizer", "adafactor", "--beta1", "1"}, "--beta1 1: must be in [0, 1)"},
      {{"--optimizer", "adafactor", "--warmup-init"}, "--warmup-init requires --relative-step"},
      {{"--optimizer", "adafactor", "--relative-step", "--lr", "0.001"}, "--relative-step: the lr is min(1e-2, 1/sqrt(t))"},
      {{"--optimizer", "adafactor", "--relative-step", "--lr-scheduler", "inverse_sqrt"}, "--relative-step: the lr is"},
      {{"--optimizer", "adafactor", "--scale-parameter", "--lr-scheduler", "reduce_lr_on_plateau"},
       "--scale-parameter with --lr-scheduler reduce_lr_on_plateau is not supported"},
      {{"--optimizer", "adam", "--scale-parameter"}, "--scale-parameter is an --optimizer adafactor flag, but the optimizer is adam"},
      {{"--optimizer", "nag", "--beta1", "0.9"}, "--beta1 is an --optimizer adafactor flag"},
      {{"--optimizer", "adam", "--clip-threshold", "2"}, "--clip-threshold is an --optimizer adafactor flag"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"train", data, "--arch", "transformer_lm_tiny", "--max-update", "1",
                                     "--save-dir", dir / "bad"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const RunResult r = run_stretch(args);
    EXPECT_EQ(r.exit_code, 2) << c.needle << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << "expected '" << c.needle << "' in:\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad/checkpoint_last.pt")) << c.needle;
  }
}

}  // namespace
}  // namespace stretch::train
