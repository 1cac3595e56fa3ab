// eval-lm, sweep and generate through the binary (build/bin/stretch) on a data-bin made by
// `stretch preprocess` and freshly initialised checkpoints that match its dictionary:
// the ALiBi README's fairseq-eval-lm commands with the program name swapped, --results-json,
// --kv-cache, evaluation past the learned table, the sweep's files and table, generation from
// a seed and the byte-level prompt, and each kind of bad input (one clear message, the exit
// code of core/error.h: 2 usage, 1 input).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <cstdio>

#include "data/indexed_dataset.h"
#include "eval/eval_lm.h"
#include "eval/generate.h"
#include "eval_test_util.h"

namespace stretch::eval {
namespace {

namespace fs = std::filesystem;
using models::PosMethod;
using testing::q;
using testing::read_file;
using testing::run_stretch;
using testing::TempDir;

class EvalCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = testing::make_data_bin(*dir_);
    for (PosMethod p : {PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned})
      testing::save_tiny_checkpoint(data_, ckpt(p), p);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string ckpt(PosMethod p) { return *dir_ / (std::string(models::pos_method_name(p)) + ".pt"); }
  static std::string readme_flags(int64_t l, int64_t c) {
    const std::string L = std::to_string(l);
    return "--sample-break-mode none --gen-subset valid --max-sentences 1 --model-overrides \"{'max_tokens':" + L +
           ", 'tokens_per_sample':" + L + ", 'max_target_positions':" + L + "}\" --tokens-per-sample " + L +
           " --max-tokens " + L + " --max-target-positions " + L + " --context-window " + std::to_string(c);
  }
  static nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* EvalCli::dir_ = nullptr;
std::string EvalCli::data_;

// "Loss (base 2): X, Perplexity: Y" as fairseq prints it. (No std::regex: GCC 12 warns
// -Wmaybe-uninitialized inside libstdc++'s regex in the sanitizer build.)
bool parse_fairseq_line(const std::string& out, double& loss, double& ppl) {
  const size_t at = out.find("Loss (base 2): ");
  return at != std::string::npos && std::sscanf(out.c_str() + at, "Loss (base 2): %lf, Perplexity: %lf", &loss, &ppl) == 2;
}

// REFERENCE.md §4.4's README commands, run unchanged with the program name swapped, at an
// evaluation length 2x and 4x the training length (8), non-overlapping and sliding (l − 1).
// The printed figures equal --results-json's, and those equal the library's evaluate() on the
// same split (tests/eval/test_eval_lm.cpp proves evaluate() against the §4.4 definition, and
// tests/parity the whole command against the PyTorch oracle).
TEST_F(EvalCli, ReadmeCommandsRunUnchanged) {
  auto valid = data::IndexedDataset::open(data_ + "/valid");
  auto model = models::load_model(ckpt(PosMethod::Alibi), nlohmann::json::object(), models::OverrideUse::Evaluation);
  for (int64_t l : {16, 32})
    for (int64_t c : {int64_t{0}, l - 1}) {
      const std::string json = *dir_ / "r.json";
      const auto r = run_stretch("eval-lm " + q(data_) + " --path " + q(ckpt(PosMethod::Alibi)) + " " +
                                 readme_flags(l, c) + " --threads 1 --results-json " + q(json));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      double loss = 0, ppl = 0;
      ASSERT_TRUE(parse_fairseq_line(r.output, loss, ppl)) << r.output;
      const auto j = read_json(json);
      EXPECT_EQ(j.at("count").get<int64_t>(), valid->total_tokens());
      EXPECT_NEAR(j.at("loss_base2").get<double>(), loss, 5e-5) << r.output;  // printed with 4 decimals
      EXPECT_NEAR(j.at("ppl").get<double>(), ppl, 5e-3) << r.output;
      EXPECT_EQ(j.at("tokens_per_sample").get<int64_t>(), l);
      EXPECT_EQ(j.at("context_window").get<int64_t>(), c);
      EXPECT_EQ(j.at("windows_per_pass").get<int64_t>(), 1);  // --max-sentences 1
      EXPECT_TRUE(j.at("fairseq_protocol").get<bool>());
      EXPECT_EQ(j.at("split").get<std::string>(), "valid");
      EXPECT_GT(j.at("peak_rss_mb").get<double>(), 0);
      const EvalResult want = evaluate(*model, *valid, {.tokens_per_sample = l, .context_window = c});
      EXPECT_NEAR(j.at("nll_sum_nats").get<double>(), want.nll_sum, 1e-5 * want.nll_sum) << "l " << l << " c " << c;
      EXPECT_NE(r.output.find(c == 0 ? "non-overlapping" : "sliding window"), std::string::npos) << r.output;
    }
}

TEST_F(EvalCli, StrideAndWordProbs) {
  const std::string a = *dir_ / "a.json", b = *dir_ / "b.json", tsv = *dir_ / "nll.tsv";
  const std::string base = "eval-lm " + q(data_) + " --path " + q(ckpt(PosMethod::Sinusoidal)) + " --threads 1 ";
  ASSERT_EQ(run_stretch(base + "--tokens-per-sample 12 --context-window 8 --results-json " + q(a)).exit_code, 0);
  const auto r = run_stretch(base + "--tokens-per-sample 12 --stride 4 --dump-nll " + q(tsv) +
                             " --results-json " + q(b));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(a).at("nll_sum_nats"), read_json(b).at("nll_sum_nats"));
  EXPECT_EQ(read_json(b).at("stride").get<int64_t>(), 4);
  std::ifstream f(tsv);
  std::string line;
  int64_t lines = 0;
  while (std::getline(f, line)) ++lines;
  EXPECT_EQ(lines, 1 + read_json(b).at("count").get<int64_t>());  // header + one line per scored token
}

TEST_F(EvalCli, KvCacheSaysItIsNotFairseq) {
  const std::string base = "eval-lm " + q(data_) + " --gen-subset valid --tokens-per-sample 8 --kv-cache --threads 1";
  const auto r = run_stretch(base + " --path " + q(ckpt(PosMethod::Alibi)) + " --results-json " + q(*dir_ / "kv.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("NOT the fairseq-eval-lm protocol"), std::string::npos) << r.output;
  EXPECT_FALSE(read_json(*dir_ / "kv.json").at("fairseq_protocol").get<bool>());
  for (PosMethod p : {PosMethod::Sinusoidal, PosMethod::Learned}) {
    const auto bad = run_stretch(base + " --path " + q(ckpt(p)));
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("--kv-cache: needs a relative position method"), std::string::npos) << bad.output;
  }
}

// §1.5: learned positions past their table: exit 2 and the message, with the README command
// (whose override of max_target_positions must not resize the trained table); sinusoidal runs.
TEST_F(EvalCli, LongerThanTraining) {
  const auto bad = run_stretch("eval-lm " + q(data_) + " --path " + q(ckpt(PosMethod::Learned)) + " " +
                               readme_flags(32, 0) + " --threads 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("learned positions: a window of 32 tokens"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("cannot extrapolate"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("Perplexity"), std::string::npos) << bad.output;
  // Within the table the same command works, also when the override is smaller than the table.
  for (int64_t l : {16, 8}) {
    const auto ok = run_stretch("eval-lm " + q(data_) + " --path " + q(ckpt(PosMethod::Learned)) + " " +
                                readme_flags(l, 0) + " --threads 1");
    EXPECT_EQ(ok.exit_code, 0) << ok.output;
  }
  const auto sin = run_stretch("eval-lm " + q(data_) + " --path " + q(ckpt(PosMethod::Sinusoidal)) + " " +
                               readme_flags(64, 63) + " --threads 1");
  EXPECT_EQ(sin.exit_code, 0) << sin.output;
}

TEST_F(EvalCli, BadInput) {
  struct Case {
    std::string args;
    int code;
    std::string needle;
  };
  // A second data-bin from another corpus: another dictionary; and one whose valid split has
  // no item (stretch preprocess refuses an empty text, fairseq-preprocess writes such a split).
  TempDir other;
  testing::write_file(other / "t.txt", "alpha beta gamma\n");
  ASSERT_EQ(run_stretch("preprocess --only-source --trainpref " + q(other / "t.txt") + " --validpref " +
                        q(other / "t.txt") + " --destdir " + q(other / "bin"))
                .exit_code,
            0);
  fs::create_directories(other / "empty");
  fs::copy_file(data_ + "/dict.txt", other / "empty/dict.txt");
  data::IndexedDatasetWriter(other / "empty/valid", data::DTypeCode::U16).finish();
  const std::string ck = q(ckpt(PosMethod::Alibi));
  const std::vector<Case> cases = {
      {"eval-lm " + q(other / "bin") + " --gen-subset valid --path " + ck, 1, "is not the dictionary the checkpoint"},
      {"eval-lm " + q(other / "empty") + " --gen-subset valid --path " + ck, 1, "split 'valid' is empty"},
      {"eval-lm " + q(data_) + " --path " + q(other / "missing.pt"), 1, "checkpoint not found"},
      {"eval-lm " + q(data_) + " --gen-subset nosuch --path " + ck, 1, "split 'nosuch' not found"},
      {"eval-lm " + q(data_) + " --path " + q(data_ + "/dict.txt"), 1, "dict.txt"},
      {"eval-lm " + q(data_) + " --path " + ck + " --context-window 8", 2, "--context-window 8 must be in [0, tokens-per-sample)"},
      {"eval-lm " + q(data_) + " --path " + ck + " --model-overrides \"{'no_such_key': 1}\"", 2, "no_such_key"},
      {"eval-lm " + q(data_) + " --path " + ck + " --no-such-flag", 2, "--no-such-flag"},
      {"eval-lm " + q(data_) + " --path " + ck + " --sample-break-mode complete_doc", 2, "--sample-break-mode"},
      {"generate " + q(other / "bin") + " --path " + ck, 1, "symbols but the checkpoint's vocabulary"},
      {"generate " + q(data_) + " --path " + q(other / "missing.pt"), 1, "checkpoint not found"},
      {"generate " + q(data_) + " --path " + ck + " --top-p 0", 2, "--top-p"},
      {"sweep " + q(data_) + " --path " + q(other / "missing.pt") + " --lengths 8", 1, "checkpoint not found"},
      {"sweep " + q(other / "bin") + " --gen-subset valid --path " + ck + " --lengths 8", 1, "another dictionary"},
      {"sweep " + q(data_) + " --path " + ck + " --lengths 8 --sliding --context-window 2", 2, "--sliding"},
  };
  for (const auto& c : cases) {
    const auto r = run_stretch(c.args + " --threads 1");
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("Perplexity"), std::string::npos) << c.args << "\n" << r.output;
  }
}

// Temporaries a killed eval-lm or sweep left ("<output>.tmp.<pid>", the plot's scratch files
// "<prefix>.<what>.tmp.<pid>") are removed by the next run writing there; a live process's and
// unrelated files are kept (issue 17; core/orphans.h).
TEST_F(EvalCli, TemporariesOfKilledEvalAndSweepRunsAreRemoved) {
  TempDir tmp;
  const std::string out = tmp / "sweep";
  std::filesystem::create_directories(out);
  stretch::testing::Sleeper live;
  const std::string dead = std::to_string(stretch::testing::dead_pid());
  const std::vector<std::string> orphans = {out + "/sweep.png.tmp." + dead, out + "/sweep.dat.tmp." + dead,
                                            out + "/sweep.svg.gp.tmp." + dead, out + "/sweep.csv.tmp." + dead,
                                            tmp / ("results.json.tmp." + dead)};
  const std::vector<std::string> kept = {out + "/sweep.png.tmp." + std::to_string(live.pid), out + "/other.png.tmp." + dead,
                                         out + "/sweep.png.tmp.x" + dead, tmp / ("results.json.tmp." + std::to_string(live.pid))};
  for (const auto& p : orphans) stretch::testing::write_file(p, "partial");
  for (const auto& p : kept) stretch::testing::write_file(p, "keep");
  const auto e = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --path " + q(ckpt(PosMethod::Alibi)) +
                             " --tokens-per-sample 8 --threads 1 --results-json " + q(tmp / "results.json"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto r = run_stretch("sweep " + q(data_) + " --path " + q(ckpt(PosMethod::Alibi)) + " --lengths 4,8 --results-dir " +
                             q(out) + " --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& p : orphans) {
    EXPECT_FALSE(std::filesystem::exists(p)) << p << "\n" << e.output << r.output;
    EXPECT_NE((e.output + r.output).find("removed " + p), std::string::npos) << p << "\n" << e.output << r.output;
  }
  for (const auto& p : kept) EXPECT_TRUE(std::filesystem::exists(p)) << p;
  // This run's own scratch files are gone, its outputs complete.
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      EXPECT_TRUE(std::find(kept.begin(), kept.end(), entry.path().string()) != kept.end()) << name;
    }
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/sweep.csv"));
}

// sweep: the Markdown table, CSV, JSON, PNG and SVG; the learned checkpoint's cells past its
// table stay empty with the reason; each cell equals eval-lm at that length.
TEST_F(EvalCli, SweepWritesTableCsvJsonAndPlots) {
  const std::string out = *dir_ / "sweep";
  const auto r = run_stretch("sweep " + q(data_) + " --path " + q(ckpt(PosMethod::Alibi)) + "," +
                             q(ckpt(PosMethod::Sinusoidal)) + "," + q(ckpt(PosMethod::Learned)) +
                             " --lengths 4,8,16,32 --results-dir " + q(out) + " --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Markdown: a header with the lengths, one row per checkpoint, "–" for the empty cell.
  EXPECT_NE(r.output.find("| model (train L) | 4 | 8 | 16 | 32 |\n|---|---|---|---|---|\n| alibi L=8 |"),
            std::string::npos)
      << r.output;
  const size_t row = r.output.find("\n| learned L=8 | ") + 1;  // the table row, not the progress log
  ASSERT_NE(row, 0u) << r.output;
  double p4 = 0, p8 = 0, p16 = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str() + row, "| learned L=8 | %lf | %lf | %lf | ", &p4, &p8, &p16), 3) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find('\n', row) - 7, 7), "| – |") << r.output;  // "–" is 3 bytes
  EXPECT_NE(r.output.find("– learned L=8 at 32: learned positions: a window of 32 tokens"), std::string::npos)
      << r.output;
  // CSV: header + 3 x 4 rows; the note is quoted (it holds commas).
  std::ifstream csv(out + "/sweep.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "label,checkpoint,train_length,eval_length,ppl,loss_base2,tokens,note");
  std::vector<std::string> lines;
  while (std::getline(csv, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[11].rfind("learned L=8," + ckpt(PosMethod::Learned) + ",8,32,,,0,\"learned positions:", 0), 0u)
      << lines[11];
  // JSON: rows and cells; null where empty.
  const auto j = read_json(out + "/sweep.json");
  ASSERT_EQ(j.at("rows").size(), 3u);
  EXPECT_EQ(j.at("protocol").get<std::string>(), "non-overlapping");
  const auto& learned = j.at("rows")[2];
  EXPECT_EQ(learned.at("train_length").get<int64_t>(), 8);
  EXPECT_TRUE(learned.at("cells")[3].at("ppl").is_null());
  EXPECT_FALSE(learned.at("cells")[2].at("ppl").is_null());
  // Each cell is eval-lm's figure at that length (valid split, the sweep's default).
  for (size_t row = 0; row < 2; ++row)
    for (size_t k = 0; k < 4; ++k) {
      const int64_t L = int64_t{4} << k;
      const std::string path = j.at("rows")[row].at("checkpoint").get<std::string>();
      const auto e = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --path " + q(path) +
                                 " --tokens-per-sample " + std::to_string(L) + " --threads 1 --results-json " +
                                 q(*dir_ / "cell.json"));
      ASSERT_EQ(e.exit_code, 0) << e.output;
      const double want = read_json(*dir_ / "cell.json").at("ppl").get<double>();
      EXPECT_NEAR(j.at("rows")[row].at("cells")[k].at("ppl").get<double>(), want, 1e-9 * want) << path << " L " << L;
    }
  // Plots: real PNG and SVG files, nothing temporary left behind.
  const std::string png = read_file(out + "/sweep.png"), svg = read_file(out + "/sweep.svg");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("alibi L=8"), std::string::npos);     // one legend entry per checkpoint
  EXPECT_NE(svg.find("learned L=8"), std::string::npos);
  EXPECT_NE(svg.find("train L=8"), std::string::npos);     // the training length marked
  EXPECT_NE(svg.find("perplexity on the 'valid' split, non-overlapping"), std::string::npos);  // what was measured
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "sweep.csv" || name == "sweep.json" || name == "sweep.png" || name == "sweep.svg") << name;
  }
}

TEST_F(EvalCli, GenerateIsReproducibleFromTheSeed) {
  const std::string base = "generate " + q(data_) + " --path " + q(ckpt(PosMethod::Alibi)) +
                           " --prompt 'w1 w2' --max-len 12 --threads 1";
  const auto a = run_stretch(base + " --seed 3"), b = run_stretch(base + " --seed 3"), c = run_stretch(base + " --seed 4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
  EXPECT_EQ(a.output.rfind("w1 w2 ", 0), 0u) << a.output;  // the prompt, then the continuation
  const auto greedy = run_stretch(base + " --temperature 0"), top1 = run_stretch(base + " --top-k 1 --seed 9");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.output;
  EXPECT_EQ(greedy.output, top1.output);
  const auto n3 = run_stretch(base + " --seed 3 --nbest 3");
  ASSERT_EQ(n3.exit_code, 0) << n3.output;
  EXPECT_EQ(n3.output.rfind(a.output, 0), 0u) << n3.output;  // the first sample is the same draw
  EXPECT_EQ(std::count(n3.output.begin(), n3.output.end(), '\n'), 3);
}

// Byte-level data: eval-lm prints bits per byte; the prompt's bytes (a newline is </s>) are the context; the binary prints
// the prompt and then the generated bytes, which equal in-process greedy decoding from a
// context built here by hand from dict.txt.
TEST_F(EvalCli, GenerateBytePrompt) {
  const std::string bytes = testing::make_data_bin(*dir_, "bytes", /*byte_level=*/true);
  const std::string ck = *dir_ / "bytes.pt";
  testing::save_tiny_checkpoint(bytes, ck, PosMethod::Rope);
  const std::string prompt = "w1 w\nw3";
  const auto r = run_stretch("generate " + q(bytes) + " --path " + q(ck) + " --prompt " + q(prompt) +
                             " --temperature 0 --max-len 6 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  data::Dictionary dict = data::Dictionary::load(bytes + "/dict.txt");
  std::vector<int32_t> context = {2};
  for (unsigned char ch : prompt) context.push_back(ch == '\n' ? 2 : dict.index(std::to_string(ch)));
  for (int32_t id : context) ASSERT_NE(id, dict.unk());
  // eval-lm on byte-level data reports bits per byte (= the loss per token).
  const auto e = run_stretch("eval-lm " + q(bytes) + " --gen-subset valid --path " + q(ck) +
                             " --threads 1 --results-json " + q(*dir_ / "bytes.json"));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto j = read_json(*dir_ / "bytes.json");
  EXPECT_TRUE(j.at("byte_level").get<bool>());
  EXPECT_EQ(j.at("bits_per_byte").get<double>(), j.at("loss_base2").get<double>());
  char line[64];
  std::snprintf(line, sizeof line, "Bits per byte: %.4f", j.at("loss_base2").get<double>());
  EXPECT_NE(e.output.find(line), std::string::npos) << e.output;
  auto model = models::load_model(ck, nlohmann::json::object(), models::OverrideUse::Evaluation);
  Rng rng(1, 1);
  const auto out = generate_tokens(*model, context, {.max_len = 6, .temperature = 0.f}, rng, banned_ids(dict));
  EXPECT_EQ(r.output, prompt + dict.decode_bytes(out) + "\n");
}

}  // namespace
}  // namespace stretch::eval

namespace stretch::eval {
namespace {

// ALiBi position interpolation (arXiv:2310.13017, issue 15): eval-lm --alibi-interpolate scales
// the slopes by L_train / L_eval (8 / 32 here) and gives what the model computes with
// alibi_slope_scale = 0.25; a model without ALiBi is refused naming the flag; sweep adds one
// "+interp" row per ALiBi model whose cells are eval-lm --alibi-interpolate's (scale 1 up to L_train).
TEST_F(EvalCli, AlibiInterpolationInEvalLmAndSweep) {
  EXPECT_DOUBLE_EQ(alibi_interpolation_scale(8, 32), 0.25);
  EXPECT_DOUBLE_EQ(alibi_interpolation_scale(8, 8), 1.0);
  EXPECT_DOUBLE_EQ(alibi_interpolation_scale(8, 4), 1.0);
  const std::string json = *dir_ / "interp.json";
  const std::string base = "eval-lm " + q(data_) + " --gen-subset valid --threads 1 --tokens-per-sample 32 ";
  const auto r = run_stretch(base + "--path " + q(ckpt(PosMethod::Alibi)) + " --alibi-interpolate --results-json " + q(json));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("slopes x 8 / 32 = 0.25"), std::string::npos) << r.output;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("alibi_slope_scale").get<double>(), 0.25);
  auto valid = data::IndexedDataset::open(data_ + "/valid");
  auto scaled = models::load_model(ckpt(PosMethod::Alibi), {{"alibi_slope_scale", 0.25}}, models::OverrideUse::Evaluation);
  auto plain = models::load_model(ckpt(PosMethod::Alibi), nlohmann::json::object(), models::OverrideUse::Evaluation);
  const EvalResult want = evaluate(*scaled, *valid, {.tokens_per_sample = 32});
  const EvalResult uninterpolated = evaluate(*plain, *valid, {.tokens_per_sample = 32});
  EXPECT_NEAR(j.at("nll_sum_nats").get<double>(), want.nll_sum, 1e-6 * want.nll_sum);
  EXPECT_GT(std::fabs(want.nll_sum - uninterpolated.nll_sum), 1e-4 * want.nll_sum);  // the flag did something
  const auto refused = run_stretch(base + "--path " + q(ckpt(PosMethod::Sinusoidal)) + " --alibi-interpolate");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--alibi-interpolate: " + ckpt(PosMethod::Sinusoidal) + " uses --pos sinusoidal"),
            std::string::npos)
      << refused.output;

  const std::string out = *dir_ / "sweep-interp";
  const auto s = run_stretch("sweep " + q(data_) + " --path " + q(ckpt(PosMethod::Alibi)) + "," +
                             q(ckpt(PosMethod::Sinusoidal)) + " --lengths 8,32 --alibi-interpolate --results-dir " +
                             q(out) + " --threads 1");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto sj = read_json(out + "/sweep.json");
  ASSERT_EQ(sj.at("rows").size(), 3u);  // alibi, alibi +interp, sinusoidal
  EXPECT_EQ(sj.at("rows")[1].at("label").get<std::string>(), "alibi L=8 +interp");
  const auto& plain_row = sj.at("rows")[0].at("cells");
  const auto& interp_row = sj.at("rows")[1].at("cells");
  EXPECT_EQ(interp_row[0].at("ppl"), plain_row[0].at("ppl"));  // L = L_train: scale 1
  EXPECT_NEAR(interp_row[1].at("ppl").get<double>(), j.at("ppl").get<double>(), 1e-9 * j.at("ppl").get<double>());
}

// A checkpoint of an ALiBi variant (learnable log-shaped slopes in groups, a per-layer scale and
// rope in the upper layer) is evaluated and sampled with no extra flag: its config carries it.
TEST_F(EvalCli, AlibiVariantCheckpointEvaluatesWithoutFlags) {
  data::Dictionary dict = data::Dictionary::load(data_ + "/dict.txt");
  models::TransformerLMConfig c = testing::tiny_config(PosMethod::Alibi, dict.size());
  c.alibi_slope_groups = "2:1,2:0.5";
  c.alibi_layer_scale = "1,0.5";
  c.alibi_learnable_slopes = true;
  c.alibi_shape = ops::AlibiShape::Log;
  c.decoder_layers = 3;
  c.pos_upper = models::UpperPos::Rope;
  c.pos_upper_from_layer = 2;
  c.alibi_layer_scale = "1,0.5,0.25";
  models::TransformerLM model(c);
  model.init(7);
  const std::string path = *dir_ / "variant.pt";
  train::save_checkpoint(path, model, {.dict_hash = dict.content_hash(), .dictionary = dict.to_text()});
  const std::string json = *dir_ / "variant.json";
  const auto r = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --threads 1 --tokens-per-sample 16 --path " +
                             q(path) + " --results-json " + q(json));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto valid = data::IndexedDataset::open(data_ + "/valid");
  const EvalResult want = evaluate(model, *valid, {.tokens_per_sample = 16});
  EXPECT_NEAR(read_json(json).at("nll_sum_nats").get<double>(), want.nll_sum, 1e-6 * want.nll_sum);
  const auto g = run_stretch("generate " + q(data_) + " --path " + q(path) + " --max-len 5 --threads 1");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  // sweep: the same number as eval-lm at L = 16, and an interpolated row at 32 (the variant's slopes x 0.5).
  const std::string sdir = *dir_ / "variant-sweep";
  const auto s = run_stretch("sweep " + q(data_) + " --path " + q(path) + " --lengths 16,32 --alibi-interpolate " +
                             "--results-dir " + q(sdir) + " --threads 1");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto sj = read_json(sdir + "/sweep.json");
  ASSERT_EQ(sj.at("rows").size(), 2u);  // the variant and its +interp row
  const double ppl16 = read_json(json).at("ppl").get<double>();
  EXPECT_NEAR(sj.at("rows")[0].at("cells")[0].at("ppl").get<double>(), ppl16, 1e-9 * ppl16);
  EXPECT_NE(sj.at("rows")[1].at("cells")[1].at("ppl"), sj.at("rows")[0].at("cells")[1].at("ppl"));
}

}  // namespace
}  // namespace stretch::eval
