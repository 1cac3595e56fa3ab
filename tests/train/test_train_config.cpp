// `stretch train` configuration through the binary: --config JSON files give the same effective
// configuration as flags, --dump-config output reads back unchanged, unknown keys are errors,
// and the ALiBi README's training command (REFERENCE.md §3) is accepted with every flag
// mapped to fairseq's meaning. With STRETCH_LONG=1 that exact command also trains one update.
#include <gtest/gtest.h>

#include "train/checkpoint.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using namespace testing;
namespace fs = std::filesystem;

// The ALiBi README command (REFERENCE.md §3), program name and data-bin swapped.
std::vector<std::string> readme_command(const std::string& data) {
  return {"train", "--task", "language_modeling", data, "--arch", "transformer_lm_wiki103", "--max-update", "286000",
          "--lr", "1.0", "--t-mult", "2", "--lr-period-updates", "270000", "--lr-scheduler", "cosine", "--lr-shrink",
          "0.75", "--warmup-updates", "16000", "--warmup-init-lr", "1e-07", "--stop-min-lr", "1e-09", "--optimizer",
          "nag", "--min-lr", "0.0001", "--clip-norm", "0.1", "--criterion", "adaptive_loss", "--max-tokens", "9216",
          "--update-freq", "1", "--tokens-per-sample", "512", "--seed", "1", "--sample-break-mode", "none",
          "--skip-invalid-size-inputs-valid-test", "--ddp-backend=legacy_ddp", "--fp16",
          "--required-batch-size-multiple", "1"};
}

nlohmann::json dump_config(const std::vector<std::string>& args, std::string* err = nullptr) {
  std::vector<std::string> a = args;
  a.push_back("--dump-config");
  const RunResult r = run_stretch(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (err) *err = r.err;
  return nlohmann::json::parse(r.out);
}

class TrainConfigCli : public ::testing::Test {
 protected:
  TempDir tmp_;
};

TEST_F(TrainConfigCli, ConfigFileGivesTheSameConfigAsFlags) {
  const std::vector<std::string> flags = {
      "--arch", "transformer_lm_small", "--pos", "rope", "--post-norm", "--share-decoder-input-output-embed",
      "--activation-fn", "gelu", "--dropout", "0.2", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
      "--lr", "0.0005", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100", "--clip-norm", "0.5",
      "--max-tokens", "2048", "--update-freq", "3", "--tokens-per-sample", "256", "--max-update", "1000",
      "--save-interval-updates", "50", "--keep-interval-updates", "2", "--log-format", "json", "--seed", "5",
      "--disable-validation"};
  const nlohmann::json from_flags = dump_config([&] {
    std::vector<std::string> a = {"train", "data-bin/x"};
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  }());
  write_file(tmp_ / "cfg.json", R"json({
    "arch": "transformer_lm_small", "pos": "rope", "post-norm": true, "share_decoder_input_output_embed": true,
    "activation_fn": "gelu", "dropout": 0.2, "optimizer": "adam", "adam_betas": "(0.9, 0.98)", "lr": 0.0005,
    "lr_scheduler": "inverse_sqrt", "warmup_updates": 100, "clip_norm": 0.5, "max_tokens": 2048, "update_freq": 3,
    "tokens_per_sample": 256, "max_update": 1000, "save_interval_updates": 50, "keep_interval_updates": 2,
    "log_format": "json", "seed": 5, "disable_validation": true})json");
  const nlohmann::json from_file = dump_config({"train", "data-bin/x", "--config", tmp_ / "cfg.json"});
  EXPECT_EQ(from_file, from_flags) << from_file.dump(1) << "\n" << from_flags.dump(1);
  // Sanity: the flags did change the defaults.
  EXPECT_EQ(from_flags.at("model").at("pos"), "rope");
  EXPECT_EQ(from_flags.at("model").at("decoder_normalize_before"), false);
  EXPECT_EQ(from_flags.at("optimizer").at("_name"), "adam");
  EXPECT_EQ(from_flags.at("optimization").at("update_freq"), 3);
}

TEST_F(TrainConfigCli, DumpConfigOutputReadsBackUnchanged) {
  const std::vector<std::string> args = {"train", "data-bin/x", "--arch", "transformer_lm_tiny", "--pos", "t5",
                                         "--optimizer", "nag", "--lr-scheduler", "cosine", "--lr", "0.3",
                                         "--max-update", "77", "--no-decoder-final-norm", "--batch-size", "8"};
  const nlohmann::json first = dump_config(args);
  write_file(tmp_ / "dumped.json", first.dump(2));
  // The data directory comes from the file too (no positional).
  const nlohmann::json again = dump_config({"train", "--config", tmp_ / "dumped.json"});
  EXPECT_EQ(again, first) << again.dump(1);
  // A flag on the command line wins over the file.
  const nlohmann::json over = dump_config({"train", "--config", tmp_ / "dumped.json", "--lr", "0.7", "data-bin/y"});
  EXPECT_EQ(over.at("optimization").at("lr"), 0.7);
  EXPECT_EQ(over.at("task").at("data"), "data-bin/y");
  EXPECT_EQ(over.at("model").at("pos"), "t5");
}

TEST_F(TrainConfigCli, UnknownConfigKeyIsAnError) {
  write_file(tmp_ / "bad.json", R"json({"lr": 0.1, "learning_rate_typo": 3})json");
  const RunResult r = run_stretch({"train", "data-bin/x", "--config", tmp_ / "bad.json", "--dump-config"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown key 'learning_rate_typo'"), std::string::npos) << r.err;
  write_file(tmp_ / "twice.json", R"json({"task": {"tokens_per_sample": 64}, "model": {"tokens_per_sample": 128}})json");
  const RunResult t = run_stretch({"train", "data-bin/x", "--config", tmp_ / "twice.json", "--dump-config"});
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_NE(t.err.find("tokens_per_sample' is given twice"), std::string::npos) << t.err;
  write_file(tmp_ / "notjson.json", "lr = 3\n");
  const RunResult n = run_stretch({"train", "data-bin/x", "--config", tmp_ / "notjson.json", "--dump-config"});
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_NE(n.err.find("not valid JSON"), std::string::npos) << n.err;
  // An empty list names its key (once read past the end of the list: the fuzzer's finding), and a
  // flag takes one value, not a list.
  for (const char* empty : {R"json({"no_progress_bar": []})json", R"json({"lr": []})json"}) {
    write_file(tmp_ / "empty.json", empty);
    const RunResult e = run_stretch({"train", "data-bin/x", "--config", tmp_ / "empty.json", "--dump-config"});
    EXPECT_EQ(e.exit_code, 2) << empty;
    EXPECT_NE(e.err.find("' is an empty list"), std::string::npos) << e.err;
  }
  write_file(tmp_ / "flaglist.json", R"json({"no_progress_bar": [true, false]})json");
  const RunResult f = run_stretch({"train", "data-bin/x", "--config", tmp_ / "flaglist.json", "--dump-config"});
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_NE(f.err.find("'no_progress_bar' is a flag and takes one value, not a list of 2"), std::string::npos)
      << f.err;
}

TEST_F(TrainConfigCli, AlibiReadmeCommandIsAcceptedAndMapped) {
  std::string err;
  const nlohmann::json c = dump_config(readme_command("data-bin/wikitext-103"), &err);
  const auto& opt = c.at("optimization");
  EXPECT_EQ(opt.at("lr"), 1.0);
  EXPECT_EQ(opt.at("max_update"), 286000);
  EXPECT_EQ(opt.at("clip_norm"), 0.1);
  EXPECT_EQ(opt.at("update_freq"), 1);
  EXPECT_EQ(opt.at("stop_min_lr"), 1e-9);
  const auto& sched = c.at("lr_scheduler");
  EXPECT_EQ(sched.at("_name"), "cosine");
  EXPECT_EQ(sched.at("t_mult"), 2.0);
  EXPECT_EQ(sched.at("lr_period_updates"), 270000);
  EXPECT_EQ(sched.at("lr_shrink"), 0.75);
  EXPECT_EQ(sched.at("warmup_updates"), 16000);
  EXPECT_EQ(sched.at("warmup_init_lr"), 1e-7);
  EXPECT_EQ(sched.at("min_lr"), 1e-4);
  EXPECT_EQ(c.at("optimizer").at("_name"), "nag");
  EXPECT_EQ(c.at("optimizer").at("momentum"), 0.99);  // fairseq's NAG default
  const auto& ds = c.at("dataset");
  EXPECT_EQ(ds.at("max_tokens"), 9216);
  EXPECT_EQ(ds.at("required_batch_size_multiple"), 1);
  EXPECT_EQ(ds.at("skip_invalid_size_inputs_valid_test"), true);
  const auto& task = c.at("task");
  EXPECT_EQ(task.at("_name"), "language_modeling");
  EXPECT_EQ(task.at("data"), "data-bin/wikitext-103");
  EXPECT_EQ(task.at("tokens_per_sample"), 512);
  EXPECT_EQ(task.at("sample_break_mode"), "none");
  EXPECT_EQ(task.at("seed"), 1);
  // transformer_lm_wiki103 (REFERENCE.md §2.1), with ALiBi as the position method.
  const auto& m = c.at("model");
  EXPECT_EQ(m.at("decoder_layers"), 16);
  EXPECT_EQ(m.at("decoder_embed_dim"), 1024);
  EXPECT_EQ(m.at("decoder_ffn_embed_dim"), 4096);
  EXPECT_EQ(m.at("decoder_attention_heads"), 8);
  EXPECT_EQ(m.at("decoder_normalize_before"), true);
  EXPECT_EQ(m.at("no_decoder_final_norm"), true);
  EXPECT_NEAR(m.at("dropout").get<double>(), 0.3, 1e-7);
  EXPECT_NEAR(m.at("attention_dropout").get<double>(), 0.1, 1e-7);
  EXPECT_NEAR(m.at("activation_dropout").get<double>(), 0.1, 1e-7);
  EXPECT_EQ(m.at("pos"), "alibi");
  EXPECT_EQ(m.at("max_target_positions"), 512);
  EXPECT_EQ(m.at("no_scale_embedding"), false);
  // The paper's adaptive input and tied adaptive softmax (issue 12), trained with adaptive_loss.
  EXPECT_EQ(m.at("adaptive_input"), true);
  EXPECT_EQ(m.at("adaptive_input_cutoff"), "20000,60000");
  EXPECT_EQ(m.at("adaptive_softmax_cutoff"), "20000,60000");
  EXPECT_EQ(m.at("adaptive_input_factor"), 4.0);
  EXPECT_EQ(m.at("adaptive_softmax_factor"), 4.0);
  EXPECT_NEAR(m.at("adaptive_softmax_dropout").get<double>(), 0.2, 1e-7);
  EXPECT_EQ(m.at("tie_adaptive_weights"), true);
  EXPECT_EQ(m.at("tie_adaptive_proj"), true);
  EXPECT_EQ(m.at("criterion"), "adaptive_loss");
  EXPECT_EQ(err.find("pending"), std::string::npos) << err;
  // What has no effect is said once, not silently dropped.
  // --fp16 is not ignored: on CPU it means --bf16 (cli/command.cpp).
  EXPECT_EQ(err.find("--fp16 has no effect"), std::string::npos) << err;
  // --ddp-backend is a real choice now (legacy_ddp: the all-reduce after backward; train/update.h).
  EXPECT_EQ(err.find("--ddp-backend has no effect"), std::string::npos) << err;
}

TEST_F(TrainConfigCli, AdaptiveFlagsMapToFairseqKeys) {
  std::string err;
  const nlohmann::json c = dump_config({"train", "data-bin/x", "--arch", "transformer_lm_tiny", "--adaptive-input",
                                        "--adaptive-input-cutoff", "20000,60000", "--adaptive-softmax-cutoff",
                                        "20000,60000", "--tie-adaptive-weights", "--tie-adaptive-proj",
                                        "--adaptive-softmax-dropout", "0.2", "--adaptive-input-factor", "2",
                                        "--adaptive-softmax-factor", "2", "--criterion", "adaptive_loss"},
                                       &err);
  const auto& m = c.at("model");
  EXPECT_EQ(m.at("adaptive_input"), true);
  EXPECT_EQ(m.at("adaptive_input_cutoff"), "20000,60000");
  EXPECT_EQ(m.at("adaptive_softmax_cutoff"), "20000,60000");
  EXPECT_EQ(m.at("adaptive_input_factor"), 2.0);
  EXPECT_EQ(m.at("adaptive_softmax_factor"), 2.0);
  EXPECT_NEAR(m.at("adaptive_softmax_dropout").get<double>(), 0.2, 1e-7);
  EXPECT_EQ(m.at("tie_adaptive_weights"), true);
  EXPECT_EQ(m.at("tie_adaptive_proj"), true);
  EXPECT_EQ(m.at("criterion"), "adaptive_loss");
  EXPECT_EQ(err.find("pending"), std::string::npos) << err;
}

// The README command itself, one update, on a data-bin of 70,000 word types (the preset's
// cutoffs 20000,60000 need more than 60,000): the 16-layer, 1024-wide adaptive model (about 234M
// parameters with this vocabulary; a 2.8 GB checkpoint with the optimizer state). STRETCH_LONG=1 only.
TEST_F(TrainConfigCli, AlibiReadmeCommandTrainsOneUpdate) {
  if (!std::getenv("STRETCH_LONG")) GTEST_SKIP() << "set STRETCH_LONG=1 (a ~234M-parameter model)";
  std::string text;
  for (int line = 0; line < 1000; ++line) {
    for (int w = 0; w < 70; ++w) text += (w ? " w" : "w") + std::to_string(line * 70 + w);
    text += "\n";
  }
  write_file(tmp_ / "train.txt", text);
  write_file(tmp_ / "valid.txt", "w1 w2 w3 w20001 w60001 w69999\n");
  const std::string data = tmp_ / "data-bin";
  const RunResult pre = run_stretch({"preprocess", "--only-source", "--trainpref", tmp_ / "train.txt", "--validpref",
                                     tmp_ / "valid.txt", "--destdir", data});
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  std::vector<std::string> args = readme_command(data);
  for (const char* a : {"--max-update", "1", "--save-dir"}) args.push_back(a);
  args.push_back(tmp_ / "ck");
  const RunResult r = run_stretch(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CheckpointContents ck = read_checkpoint(tmp_ / "ck/checkpoint_last.pt");
  EXPECT_EQ(ck.state.num_updates, 1);
  EXPECT_EQ(ck.model.at("decoder_layers"), 16);
  EXPECT_EQ(ck.model.at("decoder_embed_dim"), 1024);
  EXPECT_EQ(ck.model.at("adaptive_softmax_cutoff"), "20000,60000");
}

}  // namespace
}  // namespace stretch::train

namespace stretch::train {
namespace {

using namespace testing;

// fairseq (argparse): an option given twice takes its last value; --lr takes fairseq's
// comma list (the fixed schedule's per-epoch rates), which reads back from --dump-config.
TEST(TrainConfigLists, LastValueWinsAndLrListsRoundTrip) {
  TempDir tmp;
  const nlohmann::json c = dump_config({"train", "data-bin/x", "--lr", "0.1", "--max-update", "5", "--lr", "0.5,0.25",
                                        "--max-update", "7", "--lr-scheduler", "fixed"});
  EXPECT_EQ(c.at("optimization").at("lr"), nlohmann::json::array({0.5, 0.25}));
  EXPECT_EQ(c.at("optimization").at("max_update"), 7);
  write_file(tmp / "c.json", c.dump());
  EXPECT_EQ(dump_config({"train", "--config", tmp / "c.json"}), c);
  const RunResult bad = run_stretch({"train", "data-bin/x", "--lr", "0.5,x", "--dump-config"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--lr"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace stretch::train
