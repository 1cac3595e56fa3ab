// `stretch train` through the binary: a short run writes fairseq-named checkpoints and JSON
// logs; each kind of bad input gives one clear error (naming the file, flag or key), a non-zero
// exit, and leaves the checkpoints already written intact.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/safetensors.h"
#include "train/checkpoint.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace testing;
namespace fs = std::filesystem;

std::vector<std::string> small_args(const std::string& data, const std::string& save_dir) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
          "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--optimizer", "adam", "--lr", "1e-3",
          "--max-update", "6", "--log-format", "json", "--log-interval", "1", "--threads", "1", "--no-progress-bar",
          "--save-dir", save_dir};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Byte equality of two files, without printing megabytes on failure.
bool same_bytes(const std::string& a, const std::string& b) { return read_file(a) == read_file(b); }

bool no_temporaries(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return false;
  return true;
}

class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    data_ = new std::string(make_data_bin(*dir_));
  }
  static void TearDownTestSuite() {
    delete data_;
    delete dir_;
  }
  static TempDir* dir_;
  static std::string* data_;
  TempDir tmp_;
};
TempDir* TrainCli::dir_ = nullptr;
std::string* TrainCli::data_ = nullptr;

TEST_F(TrainCli, ShortRunWritesCheckpointsAndFairseqLogLines) {
  const std::string save = tmp_ / "ck";
  const RunResult r = run_stretch(with(small_args(*data_, save), {"--save-interval-updates", "3", "--clip-norm", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = json_lines(r.out);
  int inner = 0, valid = 0;
  for (const auto& j : lines) {
    if (j.contains("num_updates")) {
      ++inner;
      for (const char* f : {"epoch", "update", "loss", "ppl", "wps", "ups", "wpb", "bsz", "num_updates", "lr", "gnorm",
                            "clip", "train_wall", "wall"})
        EXPECT_TRUE(j.contains(f)) << f << " missing in " << j.dump();
      // ppl is 2^loss (fairseq logs base 2), each rounded as fairseq rounds it (loss 3 decimals, ppl 2).
      EXPECT_NEAR(j.at("ppl").get<double>(), std::pow(2.0, j.at("loss").get<double>()), 4e-4 * j.at("ppl").get<double>() + 0.005);
    }
    if (j.contains("valid_loss")) {
      ++valid;
      for (const char* f : {"epoch", "valid_loss", "valid_ppl", "valid_wps", "valid_wpb", "valid_bsz", "valid_num_updates"})
        EXPECT_TRUE(j.contains(f)) << f << " missing in " << j.dump();
      // fairseq adds the best loss from the second validation on (once a checkpoint recorded one).
      EXPECT_EQ(j.contains("valid_best_loss"), valid > 1) << j.dump();
    }
  }
  EXPECT_EQ(inner, 6);
  EXPECT_GE(valid, 2);  // at the save at update 3 and at the end (update 6)
  for (const char* f : {"checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_1_3.pt", "checkpoint_1_6.pt"})
    EXPECT_TRUE(fs::exists(save + "/" + f)) << f;
  EXPECT_TRUE(no_temporaries(save));
  const CheckpointContents ck = read_checkpoint(save + "/checkpoint_last.pt");
  EXPECT_EQ(ck.state.num_updates, 6);
  EXPECT_EQ(ck.config.at("decoder_embed_dim"), 16);
  EXPECT_EQ(ck.config.at("optimizer").at("_name"), "adam");
  EXPECT_TRUE(ck.file.find("optimizer.decoder.embed_tokens.weight.exp_avg"));
  // `stretch info CKPT` describes it.
  const RunResult info = run_stretch({"info", save + "/checkpoint_last.pt"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("\"num_updates\":6"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\"decoder_embed_dim\":16"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find(" optimizer"), std::string::npos) << info.out;
  // Running again with the same --max-update resumes at 6 and stops at once.
  const RunResult again = run_stretch(with(small_args(*data_, save), {"--save-interval-updates", "3"}));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("resumed from"), std::string::npos);
  EXPECT_EQ(count_of(again.out, "\"num_updates\""), 0);
}

TEST_F(TrainCli, KeepIntervalUpdatesPrunesOldIntervalCheckpoints) {
  const std::string save = tmp_ / "ck";
  const RunResult r = run_stretch(
      with(small_args(*data_, save), {"--save-interval-updates", "1", "--keep-interval-updates", "2", "--disable-validation"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int u = 1; u <= 6; ++u)
    EXPECT_EQ(fs::exists(save + "/checkpoint_1_" + std::to_string(u) + ".pt"), u >= 5) << u;
  EXPECT_FALSE(fs::exists(save + "/checkpoint_best.pt"));  // no validation: no best
}

TEST_F(TrainCli, EpochCheckpointsRetentionValidationIntervals) {
  const std::string save = tmp_ / "ck";
  const RunResult r = run_stretch(with(small_args(*data_, save), {"--max-update", "0", "--max-epoch", "3",
                                                                  "--keep-last-epochs", "2", "--validate-interval-updates",
                                                                  "7", "--log-interval", "100"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int64_t> valid_at, epochs;
  for (const auto& j : json_lines(r.out)) {
    if (j.contains("valid_loss")) valid_at.push_back(j.at("valid_num_updates").get<int64_t>());
    if (j.contains("train_loss")) epochs.push_back(j.at("epoch").get<int64_t>());
  }
  EXPECT_EQ(epochs, (std::vector<int64_t>{1, 2, 3}));
  const CheckpointContents last = read_checkpoint(save + "/checkpoint_last.pt");
  const int64_t n = last.state.num_updates, per_epoch = n / 3;
  EXPECT_EQ(n % 3, 0);
  EXPECT_EQ(last.state.epoch, 4);  // saved after the end of epoch 3: a resume starts epoch 4
  EXPECT_EQ(last.state.next_batch, 0);
  // Validation every 7 updates and at each epoch end (fairseq validates each epoch).
  std::vector<int64_t> expect;
  for (int64_t u = 1; u <= n; ++u)
    if (u % 7 == 0 || u % per_epoch == 0) expect.push_back(u);
  EXPECT_EQ(valid_at, expect);
  EXPECT_FALSE(fs::exists(save + "/checkpoint1.pt"));  // --keep-last-epochs 2
  EXPECT_TRUE(fs::exists(save + "/checkpoint2.pt"));
  EXPECT_TRUE(fs::exists(save + "/checkpoint3.pt"));
  EXPECT_TRUE(fs::exists(save + "/checkpoint_best.pt"));
  EXPECT_TRUE(same_bytes(save + "/checkpoint3.pt", save + "/checkpoint_last.pt"));
  // The best checkpoint holds the lowest validation loss seen.
  double best = 1e300;
  for (const auto& j : json_lines(r.out))
    if (j.contains("valid_loss")) best = std::min(best, j.at("valid_loss").get<double>());
  EXPECT_NEAR(read_checkpoint(save + "/checkpoint_best.pt").state.best_loss, best, 5e-4);  // logged to 3 decimals
  // --no-save: the same run writes nothing.
  const RunResult ns = run_stretch(with(small_args(*data_, tmp_ / "none"), {"--max-epoch", "1", "--no-save"}));
  EXPECT_EQ(ns.exit_code, 0) << ns.err;
  EXPECT_FALSE(fs::exists(tmp_ / "none"));
}

// fairseq's restore semantics (trainer.load_checkpoint): --reset-optimizer does not restore
// num_updates, so the fine-tuning idiom `--restore-file X --reset-optimizer --reset-dataloader
// --reset-meters` trains --max-update updates from X's weights; --finetune-from-model X is the same
// on a first launch; without resets a run already at --max-update says it has nothing to train.
TEST_F(TrainCli, ResetFlagsAndFinetuneFollowFairseqNumUpdates) {
  const std::string first = tmp_ / "first";
  const RunResult a = run_stretch(with(small_args(*data_, first), {"--disable-validation"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto losses = [](const std::string& out) {
    std::vector<std::pair<int64_t, double>> v;
    for (const auto& j : json_lines(out))
      if (j.contains("num_updates")) v.emplace_back(j.at("num_updates").get<int64_t>(), j.at("loss").get<double>());
    return v;
  };
  const auto fresh = losses(a.out);
  ASSERT_EQ(fresh.size(), 6u);
  // Without resets: nothing to train, and it says so.
  const RunResult same = run_stretch(with(small_args(*data_, tmp_ / "same"), {"--restore-file", first + "/checkpoint_last.pt",
                                                                             "--disable-validation"}));
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_TRUE(losses(same.out).empty());
  EXPECT_NE(same.err.find("nothing to train: the run is at update 6 >= --max-update 6"), std::string::npos) << same.err;
  // The idiom: six updates numbered 1..6 from the restored weights (lower loss than from scratch).
  const RunResult ft = run_stretch(with(small_args(*data_, tmp_ / "ft"),
                                        {"--restore-file", first + "/checkpoint_last.pt", "--reset-optimizer",
                                         "--reset-dataloader", "--reset-meters", "--disable-validation"}));
  ASSERT_EQ(ft.exit_code, 0) << ft.err;
  const auto tuned = losses(ft.out);
  ASSERT_EQ(tuned.size(), 6u);
  for (int64_t u = 1; u <= 6; ++u) EXPECT_EQ(tuned[u - 1].first, u);
  EXPECT_LT(tuned[0].second, fresh[0].second);
  EXPECT_NE(ft.out.find("Loaded checkpoint " + first + "/checkpoint_last.pt (epoch 1 @ 0 updates)"), std::string::npos);
  EXPECT_EQ(read_checkpoint(tmp_ / "ft/checkpoint_last.pt").state.num_updates, 6);
  // --finetune-from-model on a first launch: the same run, loss for loss.
  const RunResult fm = run_stretch(with(small_args(*data_, tmp_ / "fm"),
                                        {"--finetune-from-model", first + "/checkpoint_last.pt", "--disable-validation"}));
  ASSERT_EQ(fm.exit_code, 0) << fm.err;
  EXPECT_EQ(losses(fm.out), tuned);
  EXPECT_NE(fm.out.find("loading pretrained model from " + first + "/checkpoint_last.pt: optimizer, lr scheduler, "
                        "meters, dataloader will be reset"),
            std::string::npos)
      << fm.out;
  // A later launch into the same --save-dir resumes its checkpoint_last.pt instead (fairseq).
  const RunResult again = run_stretch(with(small_args(*data_, tmp_ / "fm"),
                                           {"--finetune-from-model", first + "/checkpoint_last.pt", "--max-update", "7",
                                            "--disable-validation"}));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(losses(again.out).size(), 1u);
  EXPECT_NE(again.err.find("is not used"), std::string::npos) << again.err;
  // --reset-optimizer alone keeps the data position but restarts the update count.
  const RunResult ro = run_stretch(with(small_args(*data_, tmp_ / "ro"), {"--restore-file", first + "/checkpoint_last.pt",
                                                                         "--reset-optimizer", "--max-update", "2",
                                                                         "--disable-validation"}));
  ASSERT_EQ(ro.exit_code, 0) << ro.err;
  EXPECT_EQ(losses(ro.out).size(), 2u);
  EXPECT_EQ(read_checkpoint(tmp_ / "ro/checkpoint_last.pt").state.next_batch, 8);  // 6 + 2 batches of epoch 1
  // Combinations fairseq refuses, and the flag with no effect here.
  const RunResult both = run_stretch(with(small_args(*data_, tmp_ / "both"), {"--finetune-from-model", first + "/checkpoint_last.pt",
                                                                             "--reset-optimizer"}));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--finetune-from-model can not be given together with --reset-optimizer"), std::string::npos)
      << both.err;
  const RunResult lrs = run_stretch(with(small_args(*data_, tmp_ / "lrs"), {"--reset-lr-scheduler", "--max-update", "1"}));
  EXPECT_EQ(lrs.exit_code, 0) << lrs.err;
  EXPECT_EQ(count_of(lrs.err, "--reset-lr-scheduler has no effect in stretch"), 1) << lrs.err;
}

// fairseq's stopping, validation and checkpoint flags, each with its fairseq meaning.
TEST_F(TrainCli, FairseqStoppingValidationAndCheckpointFlags) {
  auto valid_of = [](const std::string& out, const std::string& key = "valid_loss") {
    std::vector<std::pair<int64_t, double>> v;
    for (const auto& j : json_lines(out))
      if (j.contains(key))
        v.emplace_back(j.at(key.substr(0, key.find('_')) + "_num_updates").get<int64_t>(), j.at(key).get<double>());
    return v;
  };
  // --patience 2 (fairseq's should_stop_early, strict improvement) with a learning rate that
  // makes the validation loss wander: the run stops at the validation the rule picks.
  const RunResult p = run_stretch(with(small_args(*data_, tmp_ / "p"),
                                       {"--max-update", "40", "--validate-interval-updates", "1", "--lr", "0.3",
                                        "--patience", "2", "--log-full-precision", "--cpu"}));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto pv = valid_of(p.out);
  int64_t stop_at = -1, runs = 0;
  double best = NAN;
  for (const auto& [u, loss] : pv) {
    if (std::isnan(best) || loss < best) best = loss, runs = 0;
    else if (++runs >= 2) { stop_at = u; break; }
  }
  ASSERT_GT(stop_at, 0) << "the validation loss never stalled twice: no early stop to check\n" << p.out;
  EXPECT_EQ(pv.back().first, stop_at);
  EXPECT_NE(p.out.find("early stop since valid performance hasn't improved for last 2 runs"), std::string::npos);
  EXPECT_EQ(count_of(p.err, "--cpu has no effect in stretch"), 1) << p.err;
  // --validate-after-updates 4: the first validation at update 4; --valid-subset valid,test: both,
  // the best only on the first; --no-last-checkpoints: interval checkpoints but no checkpoint_last.
  const RunResult v = run_stretch(with(small_args(*data_, tmp_ / "v"),
                                       {"--validate-interval-updates", "2", "--validate-after-updates", "4",
                                        "--valid-subset", "valid,test", "--save-interval-updates", "3",
                                        "--no-last-checkpoints"}));
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const auto vv = valid_of(v.out), tv = valid_of(v.out, "test_loss");
  ASSERT_FALSE(vv.empty());
  EXPECT_EQ(vv.front().first, 4);
  EXPECT_EQ(vv.size(), tv.size());
  EXPECT_EQ(count_of(v.out, "\"test_best_loss\""), 0);
  EXPECT_GE(count_of(v.out, "\"valid_best_loss\""), 1);
  EXPECT_FALSE(fs::exists(tmp_ / "v/checkpoint_1_3.pt"));  // update 3 < --validate-after-updates 4
  EXPECT_TRUE(fs::exists(tmp_ / "v/checkpoint_1_6.pt"));
  EXPECT_FALSE(fs::exists(tmp_ / "v/checkpoint_last.pt"));
  // --max-valid-steps: 0 scores one batch (a different loss), a large value all of them.
  auto first_valid = [&](const std::vector<std::string>& more) {
    const RunResult r = run_stretch(with(small_args(*data_, tmp_ / "m"), more));
    fs::remove_all(tmp_ / "m");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto x = valid_of(r.out);
    return x.empty() ? NAN : x.front().second;
  };
  const std::vector<std::string> one = {"--max-update", "1", "--log-full-precision"};
  const double all = first_valid(one);
  std::vector<std::string> big = one, zero = one;
  big.insert(big.end(), {"--max-valid-steps", "1000"});
  zero.insert(zero.end(), {"--max-valid-steps", "0"});
  EXPECT_EQ(first_valid(big), all);
  EXPECT_NE(first_valid(zero), all);
  // --stop-time-hours: any positive budget is spent after the first update here.
  const RunResult t = run_stretch(with(small_args(*data_, tmp_ / "t"), {"--stop-time-hours", "1e-12"}));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("Stopping training due to cumulative_training_time: "), std::string::npos) << t.out;
  EXPECT_EQ(read_checkpoint(tmp_ / "t/checkpoint_last.pt").state.num_updates, 1);
  // --maximize-best-checkpoint-metric: checkpoint_best holds the largest validation loss.
  const RunResult mx = run_stretch(with(small_args(*data_, tmp_ / "mx"), {"--save-interval-updates", "1",
                                                                         "--maximize-best-checkpoint-metric",
                                                                         "--log-full-precision"}));
  ASSERT_EQ(mx.exit_code, 0) << mx.err;
  double worst = -1;
  for (const auto& [u, loss] : valid_of(mx.out)) worst = std::max(worst, loss);
  EXPECT_EQ(read_checkpoint(tmp_ / "mx/checkpoint_best.pt").state.best_loss, worst);
  // --best-checkpoint-metric ppl: the line's best key follows it; an unknown metric is refused.
  const RunResult pp = run_stretch(with(small_args(*data_, tmp_ / "pp"), {"--best-checkpoint-metric", "ppl", "--validate-interval-updates", "2"}));
  ASSERT_EQ(pp.exit_code, 0) << pp.err;
  EXPECT_GE(count_of(pp.out, "\"valid_best_ppl\""), 1) << pp.out;
  const RunResult bad = run_stretch(with(small_args(*data_, tmp_ / "bad"), {"--best-checkpoint-metric", "bleu"}));
  EXPECT_EQ(bad.exit_code, 2);
  // --train-subset: train on another split; a missing one is an error naming it.
  const RunResult ts = run_stretch(with(small_args(*data_, tmp_ / "ts"), {"--train-subset", "valid", "--max-update", "2"}));
  EXPECT_EQ(ts.exit_code, 0) << ts.err;
  const RunResult tn = run_stretch(with(small_args(*data_, tmp_ / "tn"), {"--train-subset", "nosuch"}));
  EXPECT_NE(tn.exit_code, 0);
  EXPECT_NE(tn.err.find("nosuch"), std::string::npos) << tn.err;
}

TEST_F(TrainCli, StopMinLrAndPerEpochLrList) {
  // fixed schedule, --lr 0.1,0.001: epoch 1 at 0.1, epoch 2 would run at 0.001 <= --stop-min-lr.
  const RunResult r = run_stretch(with(small_args(*data_, tmp_ / "ck"), {"--max-update", "0", "--lr-scheduler", "fixed",
                                                                         "--lr", "0.1,0.001", "--stop-min-lr", "0.01",
                                                                         "--disable-validation"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stopping: learning rate"), std::string::npos) << r.err;
  for (const auto& j : json_lines(r.out)) {
    if (!j.contains("num_updates")) continue;
    EXPECT_EQ(j.at("epoch"), 1);
    if (j.at("epoch") == 1) {
      EXPECT_EQ(j.at("lr").get<double>(), 0.1) << j.dump();
    }
  }
  EXPECT_EQ(read_checkpoint(tmp_ / "ck/checkpoint_last.pt").state.epoch, 2);
}

TEST_F(TrainCli, UnknownFlagIsAUsageError) {
  const RunResult r = run_stretch(with(small_args(*data_, tmp_ / "ck"), {"--no-such-flag", "3"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp_ / "ck"));
}

TEST_F(TrainCli, MissingDataDirectory) {
  const RunResult r = run_stretch(small_args(tmp_ / "nowhere", tmp_ / "ck"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(tmp_ / "nowhere"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("data directory not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint:"), std::string::npos) << r.err;
}

TEST_F(TrainCli, MissingValidSplit) {
  const std::string data = tmp_ / "data";
  fs::copy(*data_, data);
  fs::remove(data + "/valid.bin");
  fs::remove(data + "/valid.idx");
  const RunResult r = run_stretch(small_args(data, tmp_ / "ck"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("split 'valid' not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(data + "/valid"), std::string::npos) << r.err;
  // --disable-validation does without it.
  const RunResult ok = run_stretch(with(small_args(data, tmp_ / "ck"), {"--disable-validation", "--max-update", "1"}));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(TrainCli, DictionaryThatDoesNotMatchTheData) {
  // A dict.txt with fewer symbols than the ids in train.bin.
  const std::string data = tmp_ / "data";
  fs::copy(*data_, data);
  write_file(data + "/dict.txt", "w1 10\nw2 9\n");
  const RunResult r = run_stretch(small_args(data, tmp_ / "ck"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(data + "/train.bin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not an id of " + data + "/dict.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("byte offset"), std::string::npos) << r.err;
}

TEST_F(TrainCli, CheckpointTrainedWithAnotherDictionary) {
  const std::string save = tmp_ / "ck";
  ASSERT_EQ(run_stretch(with(small_args(*data_, save), {"--max-update", "1"})).exit_code, 0);
  // Same ids, one more symbol: every id is valid but the dictionary is another one.
  const std::string data = tmp_ / "data";
  fs::copy(*data_, data);
  write_file(data + "/dict.txt", read_file(data + "/dict.txt") + "extra 1\n");
  const std::string before = read_file(save + "/checkpoint_last.pt");
  const RunResult r = run_stretch(with(small_args(data, save), {"--max-update", "2"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(save + "/checkpoint_last.pt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("another dictionary"), std::string::npos) << r.err;
  EXPECT_TRUE(read_file(save + "/checkpoint_last.pt") == before);
}

TEST_F(TrainCli, CheckpointOfAnotherArchitecture) {
  const std::string save = tmp_ / "ck";
  ASSERT_EQ(run_stretch(with(small_args(*data_, save), {"--max-update", "1"})).exit_code, 0);
  const std::string before = read_file(save + "/checkpoint_last.pt");
  struct Case {
    std::vector<std::string> flags;
    std::string expect;
  };
  for (const Case& c : {Case{{"--pos", "learned"}, "pos \"alibi\" (this run: \"learned\")"},
                        Case{{"--decoder-layers", "2"}, "decoder_layers 1 (this run: 2)"},
                        Case{{"--post-norm"}, "decoder_normalize_before true (this run: false)"},
                        Case{{"--arch", "transformer_lm_small"}, "decoder_ffn_embed_dim 32 (this run: 1024)"}}) {
    std::vector<std::string> args = small_args(*data_, save);
    // The --arch case: the preset's sizes apply (drop the size flags given after it).
    if (c.flags[0] == "--arch") args = {"train", *data_, "--arch", "transformer_lm_small", "--tokens-per-sample", "16",
                                        "--batch-size", "4", "--max-update", "2", "--threads", "1", "--save-dir", save};
    else args = with(args, with(c.flags, {"--max-update", "2"}));
    const RunResult r = run_stretch(args);
    EXPECT_EQ(r.exit_code, 1) << c.flags[0];
    EXPECT_NE(r.err.find(save + "/checkpoint_last.pt: was written for another model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hint:"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(read_file(save + "/checkpoint_last.pt") == before);
}

TEST_F(TrainCli, TruncatedCheckpoint) {
  const std::string save = tmp_ / "ck";
  ASSERT_EQ(run_stretch(with(small_args(*data_, save), {"--max-update", "1"})).exit_code, 0);
  const std::string full = read_file(save + "/checkpoint_last.pt");
  write_file(save + "/checkpoint_last.pt", full.substr(0, full.size() / 2));
  const RunResult r = run_stretch(with(small_args(*data_, save), {"--max-update", "2"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot resume"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(save + "/checkpoint_last.pt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint:"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(save + "/checkpoint_last.pt"), full.size() / 2);  // left for the user to inspect
  // Not a safetensors file at all (e.g. a fairseq pickle).
  write_file(save + "/checkpoint_last.pt", std::string("\x80\x02}q\x00(X\x05\x00\x00\x00model", 16));
  const RunResult p = run_stretch(with(small_args(*data_, save), {"--max-update", "2"}));
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.err.find(save + "/checkpoint_last.pt"), std::string::npos) << p.err;
}

TEST_F(TrainCli, MissingRestoreFileIsAnError) {
  const RunResult r = run_stretch(with(small_args(*data_, tmp_ / "ck"), {"--restore-file", tmp_ / "nope.pt"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(tmp_ / "nope.pt"), std::string::npos) << r.err;
}

TEST_F(TrainCli, NonFiniteLossSkipsUpdatesThenStops) {
  // lr 1e30: update 1 is finite and throws the weights out of range; every later loss is
  // NaN/inf. Each is skipped with a warning; the third in a row stops training.
  const std::string save = tmp_ / "ck";
  const RunResult r = run_stretch(with(small_args(*data_, save), {"--optimizer", "sgd", "--lr", "1e30",
                                                                  "--max-consecutive-nan", "3",
                                                                  "--save-interval-updates", "1", "--max-update", "20"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(count_of(r.err, "skipping this update"), 3) << r.err;
  EXPECT_NE(r.err.find("training stopped: 3 updates in a row had a non-finite loss or gradient"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hint:"), std::string::npos);
  const int64_t applied = count_of(r.out, "\"num_updates\"");
  EXPECT_GE(applied, 1);
  // checkpoint_last is the complete, loadable checkpoint of the last applied update, the
  // same bytes as that update's interval checkpoint (nothing was written after it).
  const std::string last = save + "/checkpoint_last.pt";
  EXPECT_EQ(read_checkpoint(last).state.num_updates, applied);
  EXPECT_TRUE(same_bytes(last, save + "/checkpoint_1_" + std::to_string(applied) + ".pt")) << r.out;
  EXPECT_TRUE(no_temporaries(save));
}

TEST_F(TrainCli, DiskFullWhileSavingKeepsEarlierCheckpoints) {
  const std::string save = tmp_ / "ck";
  // The second save (update 4) fails after 1000 bytes like a full disk.
  for (const char* fault : {"write:1000@2", "rename@2"}) {
    fs::remove_all(save);
    const RunResult r = run_stretch(with(small_args(*data_, save), {"--save-interval-updates", "2", "--disable-validation"}),
                                    {{"STRETCH_TEST_WRITE_FAULT", fault}});
    EXPECT_EQ(r.exit_code, 1) << fault;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(save + "/checkpoint_1_4.pt"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hint:"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(save + "/checkpoint_1_4.pt"));
    EXPECT_EQ(read_checkpoint(save + "/checkpoint_last.pt").state.num_updates, 2) << fault;
    EXPECT_TRUE(same_bytes(save + "/checkpoint_last.pt", save + "/checkpoint_1_2.pt")) << fault;
    EXPECT_TRUE(no_temporaries(save)) << fault;
    // The run resumes from the intact checkpoint.
    const RunResult again = run_stretch(with(small_args(*data_, save), {"--save-interval-updates", "2", "--disable-validation"}));
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("at update 2"), std::string::npos) << again.err;
  }
}

}  // namespace
}  // namespace stretch::train
