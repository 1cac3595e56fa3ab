// tests/train/test_adaptive_span_train.cpp — the seed 004 Adaptive Span commands through the binary
// with the program name swapped, scaled down only in --max-update and sizes (issue 14):
//   fairseq-train --user-dir examples/adaptive_span --data DATA --fp16-no-flatten-grads --max-update N
//     --task truncated_bptt_lm --tokens-per-sample T --arch adaptive_span --n-layer --d-model --n-head
//     --d-inner --dropout 0.3 --attn-span --optimizer adagrad_with_grad_clip --adagrad-clip 0.03
//     --validate-interval-updates --lr-scheduler fixed --warmup-updates --batch-size-valid --lr 0.07
//     --criterion adaptive_span_loss --batch-size --update-freq 1 --seed 2 --log-format json
//     --log-interval --aux-loss-scaler 5e-07
//   fairseq-eval-lm DATA --path checkpoint --user-dir ... --task truncated_bptt_lm --batch-size 8
//     --tokens-per-sample T --gen-subset test
// Checks: the JSON train lines carry loss, avg_span and max_span; --user-dir and
// --fp16-no-flatten-grads are reported once each; checkpoint_last holds the span cache; a kill -9
// and restart continues bit for bit (cache and z included); eval-lm runs on the checkpoint.
// ValidationSharesTheCacheAndLogsSpans: fairseq's one cache for training and validation, the span
// keys in the valid and end-of-epoch lines, --adapt-span-layer True/False.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include "tensor/safetensors.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

// The training log fields compared update by update (update_lines).
const std::vector<std::string> kLogFields = {"loss", "gnorm", "avg_span", "max_span"};

using namespace testing;

std::vector<std::string> span_train_args(const std::string& data, const std::string& save) {
  return {"train", "--user-dir", "examples/adaptive_span", "--data", data, "--fp16-no-flatten-grads",
          "--max-update", "10", "--task", "truncated_bptt_lm", "--tokens-per-sample", "16", "--arch", "adaptive_span",
          "--n-layer", "2", "--d-model", "16", "--n-head", "2", "--d-inner", "32", "--dropout", "0.3",
          "--attn-span", "96", "--optimizer", "adagrad_with_grad_clip", "--adagrad-clip", "0.03",
          "--validate-interval-updates", "5", "--lr-scheduler", "fixed", "--warmup-updates", "4",
          "--batch-size-valid", "2", "--lr", "0.07", "--criterion", "adaptive_span_loss", "--batch-size", "2",
          "--update-freq", "1", "--seed", "2", "--log-format", "json", "--log-interval", "1", "--aux-loss-scaler",
          "5e-07", "--save-interval-updates", "5", "--log-full-precision", "--threads", "1", "--no-progress-bar",
          "--save-dir", save};
}

TEST(AdaptiveSpanTrain, Seed004CommandTrainsResumesAndEvaluates) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult ref = run_stretch(span_train_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto want = update_lines(ref.out, kLogFields);
  ASSERT_EQ(want.size(), 10u) << ref.out;
  // At init z = 0: avg and max span = clamp(ceil(0·96) + 32, 0, 96) = 32 (the ramp).
  EXPECT_EQ(want.at(1).at("avg_span"), 32.0);
  EXPECT_EQ(want.at(1).at("max_span"), 32.0);
  EXPECT_EQ(count_of(ref.err + ref.out, "--user-dir"), 1) << ref.err;
  EXPECT_EQ(count_of(ref.err + ref.out, "--fp16-no-flatten-grads"), 1) << ref.err;
  EXPECT_LT(want.at(10).at("loss").get<double>(), want.at(1).at("loss").get<double>());
  // The span cache is in the checkpoint: layer 0 holds min(96, L − trim + 64) rows once grown; at
  // z ≈ 0 the trim is 64·floor(min(95, 96 − 32)/64) = 64, so the cache size is 96 and after 10 blocks
  // of 16 it is full: [B = 2, 96, C = 16].
  const SafetensorsFile ck = load_safetensors(dir / "ref/checkpoint_last.pt");
  ASSERT_NE(ck.find("segment.span_cache.0"), nullptr);
  EXPECT_EQ(ck.find("segment.span_cache.0")->shape(), (Shape{2, 96, 16}));
  ASSERT_NE(ck.find("decoder.model.layers.1.attn.attn.adaptive_span._mask.current_val"), nullptr);
  {
    Child c(span_train_args(data, dir / "killed"), {{"STRETCH_TEST_STALL_AT_UPDATE", "7"}});
    ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 7"));
    c.signal(SIGKILL);
    c.wait();
  }
  const RunResult r = run_stretch(span_train_args(data, dir / "killed"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = update_lines(r.out, kLogFields);
  ASSERT_EQ(got.size(), 5u);  // updates 6..10 after the checkpoint of update 5
  for (const auto& [u, v] : got) EXPECT_EQ(v, want.at(u)) << "update " << u;
  const SafetensorsFile b = load_safetensors(dir / "killed/checkpoint_last.pt");
  ASSERT_EQ(ck.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : ck.tensors) {
    const Tensor* u = b.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), u->bytes(), t.nbytes()), 0) << name;
  }
  // The seed's evaluation command (batch size scaled to the tiny split).
  const RunResult e = run_stretch({"eval-lm", data, "--path", dir / "ref/checkpoint_last.pt", "--user-dir",
                                   "examples/adaptive_span", "--task", "truncated_bptt_lm", "--batch-size", "2",
                                   "--tokens-per-sample", "16", "--gen-subset", "valid", "--results-json",
                                   dir / "e.json"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "e.json"));
  EXPECT_GT(j.at("count").get<int64_t>(), 0);
  EXPECT_TRUE(std::isfinite(j.at("loss_base2").get<double>()));
  // The original's switches train too; a transformer_lm flag is refused, naming it.
  std::vector<std::string> orig = span_train_args(data, dir / "orig");
  orig.insert(orig.end(), {"--adapt-span-renormalise", "--adapt-span-clamp", "after_step", "--max-update", "3"});
  const RunResult o = run_stretch(orig);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  std::vector<std::string> bad = span_train_args(data, dir / "bad");
  bad.insert(bad.end(), {"--decoder-layers", "3"});
  const RunResult x = run_stretch(bad);
  EXPECT_EQ(x.exit_code, 2);
  EXPECT_NE(x.err.find("decoder_layers"), std::string::npos) << x.err;
}

// fairseq's AdaptiveSpanDecoder keeps ONE cache (`_mems`) for training and validation: validation
// continues the training cache and training continues from the cache validation left. So a run
// that validates at update 3 trains updates 4.. on other keys than a run without validation
// (dropout 0: the only difference is the cache), while updates 1..3 are the same. The valid line
// carries avg_span / max_span (the z of update 3, which update 4's forward uses too), and the
// end-of-epoch train line their mean over the epoch's updates (train_avg_span, train_max_span).
// --adapt-span-layer takes fairseq's spelled value (True / False) as well as no value.
TEST(AdaptiveSpanTrain, ValidationSharesTheCacheAndLogsSpans) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  auto args = [&](const std::string& save, std::vector<std::string> extra) {
    std::vector<std::string> a = span_train_args(data, dir / save);
    a.insert(a.end(), {"--dropout", "0", "--max-update", "0", "--max-epoch", "1", "--validate-interval-updates", "3",
                       "--save-interval-updates", "0", "--adapt-span-init", "0.4", "--aux-loss-scaler", "0.05"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const RunResult v = run_stretch(args("v", {}));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const RunResult n = run_stretch(args("n", {"--disable-validation"}));
  ASSERT_EQ(n.exit_code, 0) << n.err;
  const auto with = update_lines(v.out, kLogFields), without = update_lines(n.out, kLogFields);
  ASSERT_GE(with.size(), 5u) << v.out;
  ASSERT_EQ(with.size(), without.size());
  for (int64_t u = 1; u <= 3; ++u) EXPECT_EQ(with.at(u).at("loss"), without.at(u).at("loss")) << "update " << u;
  EXPECT_NE(with.at(4).at("loss"), without.at(4).at("loss"))
      << "validation at update 3 did not change the training cache";
  nlohmann::json valid, epoch;
  for (const auto& j : json_lines(v.out)) {
    if (j.contains("valid_loss") && j.value("valid_num_updates", 0.0) == 3.0) valid = j;
    if (j.contains("train_loss")) epoch = j;
  }
  ASSERT_TRUE(valid.contains("valid_avg_span") && valid.contains("valid_max_span")) << v.out;
  EXPECT_EQ(valid.at("valid_avg_span"), with.at(4).at("avg_span"));
  EXPECT_EQ(valid.at("valid_max_span"), with.at(4).at("max_span"));
  ASSERT_TRUE(epoch.contains("train_avg_span") && epoch.contains("train_max_span")) << v.out;
  double avg = 0, mx = 0;
  for (const auto& [u, line] : with) {
    avg += line.at("avg_span").get<double>();
    mx += line.at("max_span").get<double>();
  }
  EXPECT_NEAR(epoch.at("train_avg_span").get<double>(), avg / static_cast<double>(with.size()), 1e-9);
  EXPECT_NEAR(epoch.at("train_max_span").get<double>(), mx / static_cast<double>(with.size()), 1e-9);
  EXPECT_GT(avg / static_cast<double>(with.size()), 32.0);  // z ≈ 0.4: spans well past the ramp
  // --batch-size-valid differing from --batch-size: fairseq's task ignores it (one line says so).
  const RunResult b = run_stretch(args("b", {"--batch-size-valid", "3", "--max-update", "3"}));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(count_of(b.err + b.out, "--batch-size-valid 3 has no effect"), 1) << b.err;
  // --adapt-span-layer True / False (fairseq's spelling with a value) and the bare flag.
  for (const auto& [spelling, shape] : std::vector<std::pair<std::vector<std::string>, Shape>>{
           {{"--adapt-span-layer", "True"}, Shape{1}},
           {{"--adapt-span-layer"}, Shape{1}},
           {{"--adapt-span-layer", "False"}, Shape{2, 1, 1}}}) {
    std::vector<std::string> extra = spelling;
    extra.insert(extra.end(), {"--max-update", "1", "--disable-validation"});
    const std::string save = "layer" + std::to_string(shape.numel());
    const RunResult r = run_stretch(args(save + spelling.back(), extra));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SafetensorsFile ck = load_safetensors(dir / (save + spelling.back() + "/checkpoint_last.pt"));
    const Tensor* z = ck.find("decoder.model.layers.0.attn.attn.adaptive_span._mask.current_val");
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(z->shape(), shape) << spelling.back();
  }
}

}  // namespace
}  // namespace stretch::train
