// Usage errors of the binary that were reported badly (issue 17, defect 6), through build/bin/stretch:
// an unknown subcommand ("A subcommand is required"), CLI11's range checks (a 309-digit bound), and
// --config naming a directory (an uncaught std::ios_failure, exit 134). Each is now one message
// naming the word or flag and what is allowed, exit 2.
#include <gtest/gtest.h>

#include "cli/subcommand_name.h"
#include "models/registry.h"
#include "train/memory_estimate.h"
#include "train/train_test_util.h"

namespace stretch::cli {
namespace {

using train::testing::run_stretch;
using train::testing::RunResult;
using train::testing::TempDir;

void expect_usage_error(const std::vector<std::string>& argv, const std::string& want) {
  const RunResult r = run_stretch(argv);
  std::string cmd;
  for (const auto& a : argv) cmd += " " + a;
  SCOPED_TRACE("stretch" + cmd);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << "want \"" << want << "\" in:\n" << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368"),
            std::string::npos)
      << r.err;
}

TEST(CliErrors, UnknownSubcommandNamesItListsTheSubcommandsAndSuggests) {
  expect_usage_error({"frobnicate"}, "unknown subcommand 'frobnicate'");
  expect_usage_error({"frobnicate"}, "the subcommands are preprocess, train, eval-lm, sweep, generate, info");
  expect_usage_error({"trian", "data-bin"}, "unknown subcommand 'trian'; did you mean 'train'?");
  expect_usage_error({"evallm"}, "did you mean 'eval-lm'?");
  const RunResult r = run_stretch({"frobnicate"});
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  EXPECT_EQ(run_stretch({"--version"}).exit_code, 0);
}

TEST(CliErrors, NearestNameAndEditDistance) {
  EXPECT_EQ(edit_distance("trian", "train"), 2u);
  EXPECT_EQ(edit_distance("", "info"), 4u);
  EXPECT_EQ(edit_distance("sweep", "sweep"), 0u);
  const std::vector<std::string> names = {"preprocess", "train", "eval-lm", "sweep", "generate", "info"};
  EXPECT_EQ(nearest_name("genrate", names), "generate");
  EXPECT_EQ(nearest_name("inf", names), "info");
  EXPECT_EQ(nearest_name("frobnicate", names), "");
}

TEST(CliErrors, RangeMessagesNameTheFlagAndTheRangeReadably) {
  TempDir tmp;
  const std::string data = tmp / "no-data", ck = tmp / "none.pt";
  expect_usage_error({"eval-lm", data, "--path", ck, "--max-sentences", "-3"},
                     "--max-sentences: -3 is not allowed: must be an integer >= 0");
  expect_usage_error({"eval-lm", data, "--path", ck, "--context-window", "-1"},
                     "--context-window: -1 is not allowed: must be an integer >= 0");
  expect_usage_error({"eval-lm", data, "--path", ck, "--tokens-per-sample", "0"},
                     "--tokens-per-sample: 0 is not allowed: must be an integer >= 1");
  expect_usage_error({"eval-lm", data, "--path", ck, "--stride", "0"}, "--stride: 0 is not allowed");
  expect_usage_error({"eval-lm", data, "--path", ck, "--max-tokens", "-5"}, "--max-tokens: -5 is not allowed");
  expect_usage_error({"preprocess", "--workers", "0"}, "--workers: 0 is not allowed: must be an integer >= 1 (threads)");
  expect_usage_error({"train", data, "--threads", "-1"}, "--threads: -1 is not allowed: must be an integer >= 0");
  expect_usage_error({"generate", "--path", ck, "--nbest", "0"}, "--nbest: 0 is not allowed: must be an integer >= 1");
  expect_usage_error({"generate", "--path", ck, "--max-len", "-2"}, "--max-len: -2 is not allowed");
  expect_usage_error({"sweep", data, "--path", ck, "--lengths", "64", "--stride", "0"}, "--stride: 0 is not allowed");
  expect_usage_error({"sweep", data, "--path", ck, "--lengths", "64", "--context-window", "-4"},
                     "--context-window: -4 is not allowed");
}

TEST(CliErrors, ConfigThatIsADirectory) {
  TempDir tmp;
  expect_usage_error({"train", "--config", tmp.path().string()}, "--config " + tmp.path().string() + ": is a directory, not a file");
}

// A model far beyond this machine's memory used to end in std::bad_alloc (terminate, exit 134) after
// minutes of allocating; now it is refused before the first allocation (train/memory_estimate.h).
TEST(CliErrors, AModelTooLargeForMemoryIsRefusedBeforeAllocation) {
  TempDir tmp;
  const std::string data = train::testing::make_data_bin(tmp, 20);
  const std::vector<std::string> big = {"train", data, "--arch", "transformer_lm_tiny", "--decoder-layers", "100000",
                                        "--decoder-embed-dim", "4096", "--decoder-ffn-embed-dim", "16384",
                                        "--decoder-attention-heads", "2", "--tokens-per-sample", "16", "--batch-size", "2",
                                        "--required-batch-size-multiple", "1", "--max-update", "1", "--threads", "1",
                                        "--no-progress-bar", "--save-dir", tmp / "ck"};
  expect_usage_error(big, "--decoder-layers 100000, --decoder-embed-dim 4096, --decoder-ffn-embed-dim 16384");
  expect_usage_error(big, "more than the");
  EXPECT_EQ(train::training_bytes({{"decoder_layers", 2}, {"decoder_embed_dim", 8}, {"decoder_ffn_embed_dim", 16},
                                   {"vocab_size", 10}, {"share_decoder_input_output_embed", true}}),
            16.0 * (10 * 8 + 2 * (4 * 64 + 2 * 8 * 16 + 9 * 8 + 16)));
}

// Adaptive Span has its own keys: the estimate is 12 bytes (weights, gradients, adagrad's sum) per
// parameter the family actually builds (counted on a built model, not from the formula), and a
// model too large is refused naming its flags.
TEST(CliErrors, AdaptiveSpanMemoryEstimateCountsTheFamilysParameters) {
  const nlohmann::json cfg = {{"arch", "adaptive_span"}, {"vocab_size", 37}, {"d_model", 12}, {"n_head", 3},
                              {"d_inner", 20}, {"n_layer", 2}, {"attn_span", 50}};
  const auto model = models::build_model(models::resolve_config("adaptive_span", cfg, 16));
  EXPECT_EQ(train::training_bytes(model->config_json()), 12.0 * static_cast<double>(model->params().numel()));
  TempDir tmp;
  const std::string data = train::testing::make_data_bin(tmp, 20);
  const std::vector<std::string> big = {"train", data, "--arch", "adaptive_span", "--task", "truncated_bptt_lm",
                                        "--n-layer", "4000", "--d-model", "65536", "--d-inner", "262144", "--n-head", "2",
                                        "--tokens-per-sample", "16", "--batch-size", "2", "--max-update", "1",
                                        "--threads", "1", "--no-progress-bar", "--save-dir", tmp / "ck"};
  expect_usage_error(big, "--n-layer 4000, --d-model 65536, --d-inner 262144, --attn-span 1024");
  expect_usage_error(big, "more than the");
}

}  // namespace
}  // namespace stretch::cli
