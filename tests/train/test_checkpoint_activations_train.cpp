// --checkpoint-activations through the binary (issue 16): a transformer_lm run with dropout at
// every site and --update-freq 2 logs the same losses and gradient norms, printed with every digit,
// string for string, with and without the flag, and ends in the same weights and optimizer state;
// a kill -9 of a run with the flag, restarted (with the flag, and once without it), continues bit
// for bit; the flag lives in the trainer's "common" group of the checkpoint, never in the model
// config, so eval-lm scores a checkpoint written with it exactly as one written without it.
// transformer_xl refuses the flag naming it and the arch; --offload-activations is reported once.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <sstream>

#include "tensor/safetensors.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace testing;

std::vector<std::string> lm_args(const std::string& data, const std::string& save, bool checkpoint,
                                 const std::string& pos = "alibi") {
  std::vector<std::string> a = {
      "train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "2", "--decoder-embed-dim", "32",
      "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2", "--pos", pos, "--dropout", "0.2",
      "--attention-dropout", "0.1", "--activation-dropout", "0.1", "--tokens-per-sample", "32", "--batch-size", "4",
      "--required-batch-size-multiple", "1", "--update-freq", "2", "--optimizer", "adam", "--lr", "0.003",
      "--clip-norm", "1.0", "--max-update", "10", "--save-interval-updates", "4", "--seed", "3", "--log-format",
      "json", "--log-full-precision", "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir",
      save};
  if (checkpoint) a.push_back("--checkpoint-activations");
  return a;
}

// update -> "loss gnorm" exactly as printed (the raw JSON text of the two values).
std::map<int64_t, std::string> printed_losses(const std::string& out) {
  std::map<int64_t, std::string> m;
  std::istringstream is(out);
  std::string line;
  while (std::getline(is, line)) {
    const size_t at = line.find(" | {");
    if (at == std::string::npos || line.find("train_inner") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line.substr(at + 3));
    m[j.at("num_updates").is_string() ? std::stoll(j.at("num_updates").get<std::string>())
                                      : j.at("num_updates").get<int64_t>()] =
        j.at("loss").dump() + " " + j.at("gnorm").dump();
  }
  return m;
}

void expect_same_tensors(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    const Tensor* u = fb.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << "tensor " << name << " differs";
  }
  EXPECT_EQ(fa.metadata.at("train_state"), fb.metadata.at("train_state"));
}

TEST(CheckpointActivationsTrain, SameLossesResumeAndEvalLm) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult plain = run_stretch(lm_args(data, dir / "plain", false));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const RunResult ckpt = run_stretch(lm_args(data, dir / "ckpt", true));
  ASSERT_EQ(ckpt.exit_code, 0) << ckpt.err;
  const auto want = printed_losses(plain.out);
  ASSERT_EQ(want.size(), 10u) << plain.out;
  EXPECT_EQ(printed_losses(ckpt.out), want);
  expect_same_tensors(dir / "plain/checkpoint_last.pt", dir / "ckpt/checkpoint_last.pt");

  // A training option, not a model property: in the trainer's "common" group only.
  const SafetensorsFile f = load_safetensors(dir / "ckpt/checkpoint_last.pt");
  const nlohmann::json config = nlohmann::json::parse(f.metadata.at("config"));
  EXPECT_EQ(config.at("common").at("checkpoint_activations"), true);
  EXPECT_FALSE(config.contains("checkpoint_activations")) << config.dump();

  // kill -9 after update 6 (checkpoint_last holds update 4), restarted with the flag, and again
  // from the same point without it: updates 5..10 as in the uninterrupted run.
  for (const bool restart_with_flag : {true, false}) {
    const std::string name = restart_with_flag ? "killed" : "killed_then_plain";
    {
      Child c(lm_args(data, dir / name, true), {{"STRETCH_TEST_STALL_AT_UPDATE", "6"}});
      ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 6"));
      c.signal(SIGKILL);
      EXPECT_EQ(c.wait().exit_code, 128 + SIGKILL);
    }
    const RunResult r = run_stretch(lm_args(data, dir / name, restart_with_flag));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = printed_losses(r.out);
    ASSERT_EQ(got.size(), 6u) << r.out;
    for (const auto& [u, v] : got) EXPECT_EQ(v, want.at(u)) << name << ", update " << u;
    expect_same_tensors((dir / name) + "/checkpoint_last.pt", dir / "plain/checkpoint_last.pt");
  }

  // eval-lm reads either checkpoint and prints the same result.
  auto eval = [&](const std::string& ck) {
    const std::string out = dir / (ck + ".json");
    const RunResult e = run_stretch({"eval-lm", data, "--path", dir / (ck + "/checkpoint_last.pt"), "--gen-subset",
                                     "valid", "--tokens-per-sample", "32", "--results-json", out});
    EXPECT_EQ(e.exit_code, 0) << e.err;
    nlohmann::json j = nlohmann::json::parse(read_file(out));
    j.erase("elapsed_seconds");
    j.erase("tokens_per_second");
    j.erase("path");
    return j;
  };
  const nlohmann::json e_plain = eval("plain"), e_ckpt = eval("ckpt");
  EXPECT_TRUE(e_plain.contains("loss_base2")) << e_plain.dump();
  EXPECT_EQ(e_plain.at("loss_base2"), e_ckpt.at("loss_base2"));
  EXPECT_EQ(e_plain.at("count"), e_ckpt.at("count"));
}

TEST(CheckpointActivationsTrain, EveryPositionMethodGivesTheSameLosses) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 30);
  for (const std::string pos : {"sinusoidal", "learned", "rope", "t5", "none"}) {
    std::vector<std::string> a = lm_args(data, dir / (pos + "_plain"), false, pos), b = lm_args(data, dir / (pos + "_ckpt"), true, pos);
    for (auto* v : {&a, &b}) v->insert(v->end(), {"--max-update", "3", "--no-save"});
    const RunResult p = run_stretch(a), q = run_stretch(b);
    ASSERT_EQ(p.exit_code, 0) << pos << ": " << p.err;
    ASSERT_EQ(q.exit_code, 0) << pos << ": " << q.err;
    const auto want = printed_losses(p.out);
    EXPECT_EQ(want.size(), 3u) << pos;
    EXPECT_EQ(printed_losses(q.out), want) << pos;
  }
}

TEST(CheckpointActivationsTrain, RefusedForTransformerXlAndOffloadReported) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 30);
  const RunResult x = run_stretch({"train", data, "--task", "truncated_bptt_lm", "--arch", "transformer_xl",
                                   "--n-layer", "1", "--d-model", "16", "--n-head", "2", "--d-head", "8", "--d-inner",
                                   "32", "--mem-len", "8", "--tokens-per-sample", "8", "--batch-size", "2",
                                   "--optimizer", "adam", "--lr", "0.001", "--max-update", "1", "--no-save",
                                   "--checkpoint-activations", "--save-dir", dir / "xl"});
  EXPECT_EQ(x.exit_code, 2) << x.err;
  EXPECT_NE(x.err.find("--checkpoint-activations"), std::string::npos) << x.err;
  EXPECT_NE(x.err.find("transformer_xl"), std::string::npos) << x.err;
  std::vector<std::string> a = lm_args(data, dir / "off", true);
  a.insert(a.end(), {"--offload-activations", "--max-update", "1", "--no-save"});
  const RunResult o = run_stretch(a);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(count_of(o.err + o.out, "--offload-activations"), 1) << o.err;
}

}  // namespace
}  // namespace stretch::train
