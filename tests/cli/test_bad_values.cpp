// Bad numeric values through the binary (issue 17, defects 4 and 5): each is one usage error
// (exit 2) that names the flag (or config key), the value and what is allowed, raised at startup.
// Before the fix each of these crashed with SIGFPE (exit 136, some only after a whole epoch) or was
// accepted silently (--max-update -5 trained without a limit; sweep --lengths 0 printed an L=0
// column). The training cases give a data directory that does not exist: the error must come
// before any data is read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tensor/safetensors.h"
#include "train/train_test_util.h"

namespace stretch::cli {
namespace {

using train::testing::make_data_bin;
using train::testing::run_stretch;
using train::testing::RunResult;
using train::testing::TempDir;
using train::testing::write_file;

struct Case {
  std::vector<std::string> args;  // appended to the subcommand's base arguments
  std::string want;               // a substring of stderr
};

std::string describe(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + (a.empty() ? std::string("''") : a);
  return s;
}

void expect_usage_error(const std::vector<std::string>& argv, const std::string& want) {
  const RunResult r = run_stretch(argv);
  SCOPED_TRACE("stretch " + describe(argv));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << "want \"" << want << "\" in:\n" << r.err;
  EXPECT_EQ(r.err.find("bug in stretch"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
}

std::vector<std::string> train_args(const std::string& data, const std::string& save_dir) {
  return {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "1", "--decoder-embed-dim", "16",
          "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2", "--tokens-per-sample", "16",
          "--batch-size", "4", "--required-batch-size-multiple", "1", "--max-update", "2", "--threads", "1",
          "--no-progress-bar", "--save-dir", save_dir};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(BadValues, TrainFlagsAreUsageErrorsBeforeAnyDataIsRead) {
  TempDir tmp;
  const std::string nowhere = tmp / "no-such-data-bin";
  const std::vector<Case> cases = {
      // defect 4: division by zero
      {{"--decoder-attention-heads", "0"}, "--decoder-attention-heads 0 (model config key 'decoder_attention_heads'): must be an integer >= 1"},
      {{"--decoder-attention-heads", "-2"}, "--decoder-attention-heads -2 (model config key 'decoder_attention_heads'): must be an integer >= 1"},
      {{"--decoder-embed-dim", "0"}, "--decoder-embed-dim 0 (model config key 'decoder_embed_dim'): must be an integer >= 1"},
      {{"--save-interval", "0"}, "--save-interval: 0 is not allowed: must be an integer >= 1"},
      {{"--validate-interval", "0"}, "--validate-interval: 0 is not allowed: must be an integer >= 1"},
      // defect 5: accepted silently
      {{"--max-update", "-5"}, "--max-update: -5 is not allowed: must be an integer >= 0 (0: no limit)"},
      {{"--max-epoch", "-1"}, "--max-epoch: -1 is not allowed: must be an integer >= 0 (0: no limit)"},
      {{"--save-interval-updates", "-1"}, "--save-interval-updates: -1 is not allowed: must be an integer >= 0"},
      {{"--warmup-updates", "-10"}, "--warmup-updates: -10 is not allowed: must be an integer >= 0"},
      {{"--required-batch-size-multiple", "0"}, "--required-batch-size-multiple: 0 is not allowed: must be an integer >= 1"},
      {{"--lr-scheduler", "cosine", "--lr-period-updates", "0"}, "--lr-period-updates: 0 is not allowed: must be an integer >= 1"},
      {{"--max-tokens", "99999999999999999999"}, "--max-tokens: 99999999999999999999 is beyond the 64-bit integer range"},
      {{"--max-tokens", "-4096"}, "--max-tokens: -4096 is not allowed: must be an integer >= 0"},
      {{"--pos", "rope", "--rope-base", "0"}, "--rope-base 0 (model config key 'rope_base'): must be a finite number > 1"},
      {{"--dropout", "nan"}, "--dropout nan (model config key 'dropout'): must be a probability in [0, 1)"},
      {{"--update-freq", "x2"}, "--update-freq: 'x2' is not an integer"},
  };
  for (const Case& c : cases) expect_usage_error(with(train_args(nowhere, tmp / "ck"), c.args), c.want);
}

// The ALiBi variant flags (issue 15): one usage error naming the flag, before any data is read.
TEST(BadValues, AlibiVariantFlagsAreUsageErrorsNamingTheFlag) {
  TempDir tmp;
  const std::string nowhere = tmp / "no-such-data-bin";
  const std::vector<Case> cases = {
      {{"--alibi-slopes", "0.5"}, "--alibi-slopes '0.5' (model config key 'alibi_slopes'): has 1 slopes for 2 heads"},
      {{"--alibi-slopes", "0.5,nan"}, "--alibi-slopes '0.5,nan' (model config key 'alibi_slopes'): 'nan' is not a finite number"},
      {{"--alibi-slope-groups", "1:1"}, "--alibi-slope-groups '1:1' (model config key 'alibi_slope_groups'): the groups cover 1 heads, the model has 2"},
      {{"--alibi-layer-scale", "1,1"}, "--alibi-layer-scale '1,1' (model config key 'alibi_layer_scale'): has 2 factors for 1 layers"},
      {{"--alibi-shape", "cubic"}, "--alibi-shape: cubic not in {linear,log,clipped}"},
      {{"--alibi-shape", "clipped"}, "--alibi-clip-distance 0 (model config key 'alibi_clip_distance')"},
      {{"--alibi-no-bias-heads", "0:2"}, "--alibi-no-bias-heads '0:2' (model config key 'alibi_no_bias_heads'): 0:2 is outside"},
      {{"--alibi-slope-warmup-updates", "10", "--alibi-slope-warmup-init", "2"}, "--alibi-slope-warmup-init 2"},
      {{"--pos", "rope", "--alibi-learnable-slopes"}, "--alibi-learnable-slopes is an ALiBi variant, but --pos is rope"},
      {{"--pos-upper", "rope"}, "--pos-upper-from-layer 0 (model config key 'pos_upper_from_layer')"},
  };
  for (const Case& c : cases) expect_usage_error(with(train_args(nowhere, tmp / "ck"), c.args), c.want);
}

TEST(BadValues, TrainConfigFileValuesAreCheckedLikeFlags) {
  TempDir tmp;
  write_file(tmp / "cfg.json", R"({"checkpoint": {"save_interval": 0}})");
  expect_usage_error(with(train_args(tmp / "no-such-data-bin", tmp / "ck"), {"--config", tmp / "cfg.json"}),
                     "--save-interval: 0 is not allowed");
  write_file(tmp / "model.json", R"({"model": {"decoder_attention_heads": 0}})");
  // (a flag on the command line would win over the file's value, so none is given here)
  expect_usage_error({"train", tmp / "no-such-data-bin", "--batch-size", "4", "--config", tmp / "model.json"},
                     "--decoder-attention-heads 0 (model config key 'decoder_attention_heads')");
}

// The defaults (and what --dump-config prints) still pass: -1 is fairseq's "unset" for
// --lr-period-updates and --keep-last-epochs, 0 means "no limit" / "off".
TEST(BadValues, DefaultsAndSentinelsStillParse) {
  TempDir tmp;
  const RunResult r = run_stretch(with(train_args(tmp / "no-such-data-bin", tmp / "ck"),
                                       {"--lr-period-updates", "-1", "--keep-last-epochs", "-1", "--max-epoch", "0",
                                        "--save-interval-updates", "0", "--dump-config"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("lr_scheduler").at("lr_period_updates"), -1);
  // The dumped config reads back through --config.
  write_file(tmp / "dumped.json", r.out);
  const RunResult again = run_stretch({"train", "--config", tmp / "dumped.json", "--dump-config"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out), j);
}

class BadValuesWithCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    data_ = new std::string(make_data_bin(*dir_, 40));
    const RunResult r = run_stretch(with(train_args(*data_, *dir_ / "ck"), {"--max-update", "1", "--disable-validation"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ckpt_ = new std::string(*dir_ / "ck/checkpoint_last.pt");
  }
  static void TearDownTestSuite() {
    delete ckpt_;
    delete data_;
    delete dir_;
  }
  static TempDir* dir_;
  static std::string *data_, *ckpt_;
};
TempDir* BadValuesWithCheckpoint::dir_ = nullptr;
std::string* BadValuesWithCheckpoint::data_ = nullptr;
std::string* BadValuesWithCheckpoint::ckpt_ = nullptr;

TEST_F(BadValuesWithCheckpoint, ModelOverridesAreValidated) {
  expect_usage_error({"eval-lm", *data_, "--path", *ckpt_, "--threads", "1", "--model-overrides",
                      "{'decoder_attention_heads': 0}"},
                     "--decoder-attention-heads 0 (model config key 'decoder_attention_heads')");
  expect_usage_error({"eval-lm", *data_, "--path", *ckpt_, "--threads", "1", "--model-overrides",
                      "{'decoder_embed_dim': 0}"},
                     "--decoder-embed-dim 0 (model config key 'decoder_embed_dim')");
}

// Issue 17, defect 6: a type error in --model-overrides names the key, the value and the file (once;
// it was "ck.pt: ck.pt: model config key ...").
TEST_F(BadValuesWithCheckpoint, ModelOverrideTypeErrorsNameTheKeyAndTheFileOnce) {
  const std::vector<std::string> args = {"eval-lm", *data_, "--path", *ckpt_, "--threads", "1", "--model-overrides",
                                         "{'decoder_layers': 'abc'}"};
  expect_usage_error(args, *ckpt_ + ": model config key 'decoder_layers' has the value \"abc\", which is not an integer");
  const RunResult r = run_stretch(args);
  EXPECT_EQ(r.err.find(*ckpt_ + ": " + *ckpt_), std::string::npos) << r.err;
}

TEST_F(BadValuesWithCheckpoint, CheckpointConfigIsValidated) {
  SafetensorsFile f = load_safetensors(*ckpt_);
  auto cfg = nlohmann::json::parse(f.metadata.at("config"));
  ASSERT_TRUE(cfg.contains("decoder_attention_heads"));
  cfg["decoder_attention_heads"] = 0;
  f.metadata["config"] = cfg.dump();
  TempDir tmp;
  const std::string bad = tmp / "heads0.pt";
  save_safetensors(bad, f.tensors, f.metadata);
  // The key is named; naming the file as well needs read_checkpoint to validate (see the report).
  expect_usage_error({"eval-lm", *data_, "--path", bad, "--threads", "1"},
                     "(model config key 'decoder_attention_heads'): must be an integer >= 1");
}

TEST_F(BadValuesWithCheckpoint, SweepLengthsMustBePositive) {
  TempDir tmp;
  for (const char* lengths : {"0", "-64", "", "64,0", "0x40", "64.5"}) {
    expect_usage_error({"sweep", *data_, "--path", *ckpt_, "--lengths", lengths, "--results-dir", tmp / "r"},
                       "--lengths: ");
  }
  expect_usage_error({"sweep", *data_, "--path", *ckpt_, "--lengths", "0", "--results-dir", tmp / "r"},
                     "--lengths: 0 is not allowed: must be an integer >= 1 (an evaluation length in tokens");
  expect_usage_error({"sweep", *data_, "--path", *ckpt_, "--lengths", "", "--results-dir", tmp / "r"},
                     "--lengths: an empty value is not allowed");
  // Before any data or checkpoint is read:
  expect_usage_error({"sweep", tmp / "no-such-data-bin", "--path", tmp / "none.pt", "--lengths", "-64"},
                     "--lengths: -64 is not allowed");
}

}  // namespace
}  // namespace stretch::cli
