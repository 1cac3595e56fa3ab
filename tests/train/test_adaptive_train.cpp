// Adaptive input + tied adaptive softmax through the binary (issue 12): `stretch train
// --criterion adaptive_loss` runs, its losses fall, a run stopped at update 4 and resumed from
// checkpoint_last logs updates 5-8 bit for bit as the uninterrupted run and ends with identical
// weights and optimizer state; eval-lm and generate run on the checkpoint and `stretch info` shows
// the adaptive layout (eval-lm's numbers against the PyTorch oracle: parity_eval_lm_adaptive). The same on PTB's
// real 10k vocabulary (cutoffs 2000,6000) when ../shared/data/ptb is there.
#include <gtest/gtest.h>

#include <cstring>

#include "tensor/safetensors.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace testing;
namespace fs = std::filesystem;

std::vector<std::string> adaptive_args(const std::string& data, const std::string& save, int64_t max_update,
                                       const std::string& cutoffs) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "32",
          "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2", "--dropout", "0.1",
          "--tokens-per-sample", "16", "--batch-size", "4", "--required-batch-size-multiple", "1",
          "--optimizer", "nag", "--lr", "0.05", "--clip-norm", "0.5", "--max-update", std::to_string(max_update),
          "--save-interval-updates", "4", "--seed", "5", "--log-format", "json", "--log-interval", "1",
          "--threads", "1", "--no-progress-bar", "--disable-validation", "--save-dir", save,
          // the seed command's adaptive flags, at cutoffs that fit the dictionary
          "--adaptive-input", "--adaptive-input-cutoff", cutoffs, "--adaptive-softmax-cutoff", cutoffs,
          "--tie-adaptive-weights", "--tie-adaptive-proj", "--adaptive-softmax-dropout", "0.2",
          "--criterion", "adaptive_loss"};
}

std::map<int64_t, nlohmann::json> losses(const std::string& out) {
  std::map<int64_t, nlohmann::json> m;
  for (const auto& j : json_lines(out))
    if (j.contains("num_updates"))
      m[j.at("num_updates").get<int64_t>()] = {j.at("loss"), j.at("gnorm"), j.at("lr"), j.at("wpb")};
  return m;
}

void expect_same_tensors(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = load_safetensors(a), fb = load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors) {
    const Tensor* u = fb.find(name);
    ASSERT_NE(u, nullptr) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << "tensor " << name << " differs";
  }
}

void train_resume_eval_generate(const std::string& data, const TempDir& dir, const std::string& cutoffs,
                                const std::string& prompt) {
  const RunResult full = run_stretch(adaptive_args(data, dir / "full", 8, cutoffs));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(full.err.find("pending"), std::string::npos) << full.err;
  const auto ref = losses(full.out);
  ASSERT_EQ(ref.size(), 8u);
  EXPECT_LT(ref.at(8)[0].get<double>(), ref.at(1)[0].get<double>()) << "the loss falls";

  const std::string save = dir / "resumed";
  const RunResult first = run_stretch(adaptive_args(data, save, 4, cutoffs));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const RunResult second = run_stretch(adaptive_args(data, save, 8, cutoffs));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("at update 4"), std::string::npos) << second.err;
  const auto resumed = losses(second.out);
  ASSERT_EQ(resumed.size(), 4u);
  for (const auto& [u, v] : resumed) EXPECT_EQ(v, ref.at(u)) << "update " << u;
  expect_same_tensors(save + "/checkpoint_last.pt", dir / "full/checkpoint_last.pt");

  const std::string ckpt = dir / "full/checkpoint_last.pt";
  const RunResult info = run_stretch({"info", ckpt});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("\"adaptive_softmax_cutoff\":\"" + cutoffs + "\""), std::string::npos) << info.out;
  const RunResult ev = run_stretch({"eval-lm", data, "--path", ckpt, "--gen-subset", "valid", "--tokens-per-sample",
                                    "16", "--max-tokens", "512", "--threads", "1"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find("Loss (base 2): "), std::string::npos) << ev.out;
  const RunResult gen = run_stretch({"generate", "--path", ckpt, "--prompt", prompt, "--max-len", "6", "--top-k",
                                     "5", "--threads", "1"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(gen.out.rfind(prompt, 0), 0u) << gen.out;
  std::istringstream words(gen.out);
  int n = 0;
  for (std::string w; words >> w;) ++n;
  EXPECT_EQ(n, 2 + 6) << gen.out;
}

TEST(AdaptiveTrain, SyntheticCorpusTrainsResumesEvaluatesGenerates) {
  TempDir dir;
  const std::string data = make_data_bin(dir);  // 40 words + 4 specials, padded to 48
  train_resume_eval_generate(data, dir, "12,24", "w1 w2");
}

TEST(AdaptiveTrain, PtbTrainsResumesEvaluatesGenerates) {
  const std::string ptb = std::string(STRETCH_DATA_DIR) + "/ptb";
  if (!fs::exists(ptb + "/ptb.train.txt")) GTEST_SKIP() << "PTB not found under STRETCH_DATA_DIR=" << STRETCH_DATA_DIR;
  TempDir dir;
  const std::string data = dir / "data-bin";
  const RunResult pre = run_stretch({"preprocess", "--only-source", "--trainpref", ptb + "/ptb.train.txt",
                                     "--validpref", ptb + "/ptb.test.txt", "--destdir", data});
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  train_resume_eval_generate(data, dir, "2000,6000", "the company");
}

TEST(AdaptiveTrain, Wiki103PresetOnASmallDictionarySaysWhatToDo) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult r = run_stretch({"train", data, "--arch", "transformer_lm_wiki103", "--criterion", "adaptive_loss",
                                   "--tokens-per-sample", "16", "--max-tokens", "64", "--max-update", "1", "--threads", "1", "--save-dir", dir / "ck"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--adaptive-input-cutoff '20000,60000' (model config key 'adaptive_input_cutoff'): cutoff "
                       "20000 exceeds the vocabulary size 48"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "ck/checkpoint_last.pt"));
  const RunResult ce = run_stretch({"train", data, "--criterion", "adaptive_loss", "--tokens-per-sample", "16", "--max-tokens", "64", "--max-update", "1",
                                    "--threads", "1", "--save-dir", dir / "ck2"});
  EXPECT_EQ(ce.exit_code, 2) << ce.err;
  EXPECT_NE(ce.err.find("--criterion adaptive_loss needs an adaptive softmax"), std::string::npos) << ce.err;
}

}  // namespace
}  // namespace stretch::train
