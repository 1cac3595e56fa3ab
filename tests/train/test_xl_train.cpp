// Seed 004's Transformer-XL commands through the binary (program name swapped, sizes and
// --max-update scaled down): fairseq-train ... --task truncated_bptt_lm --arch transformer_xl
// --n-layer --d-model --n-head --d-head --d-inner --dropout --dropatt --mem-len ... then
// fairseq-eval-lm --task truncated_bptt_lm --batch-size 8 --tokens-per-sample 80 --model-overrides
// "{'mem_len':2100,'clamp_len':820,'same_length':True}" scaled to the tiny data. Checked: the JSON
// logs carry fairseq's fields, checkpoint_last holds the memory (segment.mem.*), a kill -9 resume
// continues bit for bit, the memory changes training, and eval-lm with the seed's overrides runs
// and differs from the training memory's result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "tensor/safetensors.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace stretch::train::testing;

std::vector<std::string> xl_train_args(const std::string& data, const std::string& save) {
  return {"train", data, "--task", "truncated_bptt_lm", "--fp16", "--max-update", "10", "--tokens-per-sample", "16",
          "--arch", "transformer_xl", "--n-layer", "2", "--d-model", "32", "--n-head", "2", "--d-head", "16",
          "--d-inner", "64", "--dropout", "0.1", "--dropatt", "0.1", "--mem-len", "16", "--optimizer", "adam",
          "--clip-norm", "0.25", "--lr-scheduler", "cosine", "--warmup-updates", "0", "--lr", "0.0", "--lr", "0.0025",
          "--batch-size", "2", "--update-freq", "1", "--seed", "2", "--log-format", "json", "--log-interval", "1",
          "--log-full-precision", "--save-interval-updates", "4", "--threads", "1", "--no-progress-bar",
          "--save-dir", save};
}

std::map<int64_t, nlohmann::json> inner_lines(const std::string& out) {
  std::map<int64_t, nlohmann::json> m;
  for (const auto& j : json_lines(out))
    if (j.contains("num_updates") && j.contains("loss"))
      m[j.at("num_updates").get<int64_t>()] = {j.at("loss"), j.at("gnorm"), j.at("wpb"), j.at("lr")};
  return m;
}

TEST(XlTrain, SeedCommandsTrainResumeAndEvaluateWithMemory) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult ref = run_stretch(xl_train_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto want = inner_lines(ref.out);
  ASSERT_EQ(want.size(), 10u);
  EXPECT_EQ(want.at(1).at(2), 32);  // wpb = B·T, fairseq's ntokens
  bool fields = false;
  for (const auto& j : json_lines(ref.out))
    if (j.contains("num_updates") && j.contains("ppl") && j.contains("wps") && j.contains("lr") && j.contains("gnorm"))
      fields = true;
  EXPECT_TRUE(fields) << ref.out;
  const SafetensorsFile ck = load_safetensors(dir / "ref/checkpoint_last.pt");
  ASSERT_NE(ck.find("segment.mem.1"), nullptr);
  EXPECT_EQ(ck.find("segment.mem.1")->shape(), (Shape{2, 16, 32}));
  ASSERT_NE(ck.find("decoder.model.transformer.layers.1.dec_attn.r_net.weight"), nullptr);
  {
    Child c(xl_train_args(data, dir / "killed"), {{"STRETCH_TEST_STALL_AT_UPDATE", "6"}});
    ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 6"));
    c.signal(SIGKILL);
    c.wait();
  }
  const RunResult r = run_stretch(xl_train_args(data, dir / "killed"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("at update 4"), std::string::npos) << r.err;
  const auto got = inner_lines(r.out);
  ASSERT_EQ(got.size(), 6u);  // updates 5..10
  for (const auto& [u, v] : got) EXPECT_EQ(v, want.at(u)) << "update " << u;
  const SafetensorsFile a = load_safetensors(dir / "ref/checkpoint_last.pt");
  const SafetensorsFile b = load_safetensors(dir / "killed/checkpoint_last.pt");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const Tensor* u = b.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << name;
  }
  // The memory is used: without it the run trains differently.
  std::vector<std::string> args = xl_train_args(data, dir / "nomem");
  args[std::find(args.begin(), args.end(), "--mem-len") - args.begin() + 1] = "0";
  const RunResult nomem = run_stretch(args);
  ASSERT_EQ(nomem.exit_code, 0) << nomem.err;
  EXPECT_NE(inner_lines(nomem.out).at(3).at(0), want.at(3).at(0));

  // The seed's evaluation command: the training memory, then its overrides (scaled: mem_len 40,
  // clamp_len 12, same_length), which must run and change the result (same count).
  const std::string ckpt = dir / "ref/checkpoint_best.pt";
  const RunResult e = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm", "--batch-size", "2",
                                   "--tokens-per-sample", "10", "--gen-subset", "valid", "--results-json",
                                   dir / "e.json"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const RunResult o = run_stretch({"eval-lm", data, "--path", ckpt, "--user-dir", "examples/truncated_bptt/", "--task",
                                   "truncated_bptt_lm", "--batch-size", "2", "--tokens-per-sample", "10",
                                   "--model-overrides", "{'mem_len':40,'clamp_len':12,'same_length':True}",
                                   "--gen-subset", "valid", "--results-json", dir / "o.json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const nlohmann::json je = nlohmann::json::parse(read_file(dir / "e.json"));
  const nlohmann::json jo = nlohmann::json::parse(read_file(dir / "o.json"));
  EXPECT_EQ(jo.at("count"), je.at("count"));
  EXPECT_NE(jo.at("loss_base2"), je.at("loss_base2"));
  EXPECT_TRUE(std::isfinite(jo.at("loss_base2").get<double>()));
  // An override that would change the trained tensors is refused, naming the key.
  const RunResult bad = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm", "--batch-size", "2",
                                     "--tokens-per-sample", "10", "--model-overrides", "{'d_model': 64}"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("d_model"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace stretch::train
