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

// The training log fields compared update by update (update_lines).
const std::vector<std::string> kLogFields = {"loss", "gnorm", "wpb", "lr"};

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

TEST(XlTrain, SeedCommandsTrainResumeAndEvaluateWithMemory) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult ref = run_stretch(xl_train_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto want = update_lines(ref.out, kLogFields);
  ASSERT_EQ(want.size(), 10u);
  EXPECT_EQ(want.at(1).at("wpb"), 32);  // wpb = B·T, fairseq's ntokens
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
  const auto got = update_lines(r.out, kLogFields);
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
  EXPECT_NE(update_lines(nomem.out, kLogFields).at(3).at("loss"), want.at(3).at("loss"));

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

// fairseq's WikiText-103 Transformer-XL command (examples/truncated_bptt README; REFERENCE.md §6.6)
// with the sizes, --max-update and the adaptive softmax's cutoffs scaled to the 40-word synthetic
// corpus (20000,40000,200000 -> 10,25: two clusters), then its evaluation command with the
// README's overrides scaled ({"mem_len":640,"clamp_len":400,"same_length":True} -> 40, 12). Checked:
// the adaptive softmax's parameters are in the checkpoint under HF's names, training lowers the
// loss, eval-lm runs and its overrides change the result; the same with --div-val 2 (projected
// bands); a --div-val that leaves a band no dimensions is refused naming the flag.
TEST(XlTrain, Wiki103CommandWithAdaptiveSoftmax) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  auto args = [&](const std::string& save, const std::string& div_val) {
    return std::vector<std::string>{
        "train", data, "--user-dir", "examples/truncated_bptt", "--task", "truncated_bptt_lm",
        "--tokens-per-sample", "12", "--batch-size", "2", "--max-update", "12", "--arch", "transformer_xl",
        "--n-layer", "2", "--d-model", "32", "--n-head", "2", "--d-head", "16", "--d-inner", "64",
        "--dropout", "0.1", "--dropatt", "0.0", "--mem-len", "12", "--cutoffs", "10,25", "--div-val", div_val,
        "--optimizer", "adam", "--clip-norm", "0.25", "--lr-scheduler", "cosine", "--warmup-updates", "0",
        "--min-lr", "0.0", "--lr", "0.0025", "--seed", "3", "--log-format", "json", "--log-interval", "1",
        "--log-full-precision", "--threads", "1", "--no-progress-bar", "--save-dir", save};
  };
  for (const std::string div_val : {"1", "2"}) {
    const std::string save = dir / ("wt103-div" + div_val);
    const RunResult r = run_stretch(args(save, div_val));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = update_lines(r.out, kLogFields);
    ASSERT_EQ(lines.size(), 12u) << r.out;
    EXPECT_LT(lines.at(12).at("loss").get<double>(), lines.at(1).at("loss").get<double>()) << "div_val " << div_val;
    const SafetensorsFile ck = load_safetensors(save + "/checkpoint_last.pt");
    ASSERT_NE(ck.find("decoder.model.crit.cluster_weight"), nullptr);
    EXPECT_EQ(ck.find("decoder.model.crit.cluster_weight")->shape(), (Shape{2, 32}));
    ASSERT_NE(ck.find("decoder.model.crit.cluster_bias"), nullptr);
    if (div_val == "2") {
      ASSERT_NE(ck.find("decoder.model.transformer.word_emb.emb_layers.2.weight"), nullptr);
      EXPECT_EQ(ck.find("decoder.model.transformer.word_emb.emb_layers.2.weight")->shape()[1], 8);
      EXPECT_NE(ck.find("decoder.model.crit.out_projs.0"), nullptr);
    }
    const std::string ckpt = save + "/checkpoint_best.pt";
    auto eval = [&](const std::string& json, const std::vector<std::string>& extra) {
      std::vector<std::string> a = {"eval-lm", data, "--path", ckpt, "--user-dir", "examples/truncated_bptt",
                                    "--task", "truncated_bptt_lm", "--batch-size", "1", "--tokens-per-sample", "8",
                                    "--gen-subset", "test", "--results-json", json};
      a.insert(a.end(), extra.begin(), extra.end());
      const RunResult e = run_stretch(a);
      EXPECT_EQ(e.exit_code, 0) << e.err;
      return nlohmann::json::parse(read_file(json));
    };
    const nlohmann::json plain = eval(dir / "plain.json", {});
    const nlohmann::json over =
        eval(dir / "over.json", {"--model-overrides", "{\"mem_len\":40,\"clamp_len\":12,\"same_length\":True}"});
    EXPECT_EQ(plain.at("count"), over.at("count"));
    EXPECT_NE(plain.at("loss_base2"), over.at("loss_base2"));
    EXPECT_TRUE(std::isfinite(over.at("loss_base2").get<double>()));
  }
  std::vector<std::string> bad = args(dir / "bad", "8");
  bad[std::find(bad.begin(), bad.end(), "--cutoffs") - bad.begin() + 1] = "10,20,30";
  const RunResult r = run_stretch(bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--div-val 8"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stretch::train
