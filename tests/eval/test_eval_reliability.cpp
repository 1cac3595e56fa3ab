// Issue 17, defects 2, 3 and 11 through the binary (build/bin/stretch), on checkpoints written
// in-process with a poisoned weight:
//  - eval-lm: a NaN score is an error (exit 1) naming its stream offset and target; before the
//    fix it was dropped like ±inf and a perplexity over the remaining tokens was printed (exit 0).
//    ±inf scores are dropped as fairseq drops them, and their count is printed and in
//    --results-json (before: dropped silently).
//  - generate: NaN logits are an error naming the step (before: madeupword padding symbols, exit
//    0); --temperature nan/inf/-1, --top-p nan/0/1.5 and --top-k -1 are usage errors (exit 2;
//    before, --temperature nan and --top-p nan were accepted).
//  - a PyTorch .pt (zip archive or pickle) given to eval-lm, info or generate says what it is
//    (before: "header length 5088219219985302144 exceeds the 100 MB limit").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/indexed_dataset.h"
#include "eval_test_util.h"

namespace stretch::eval {
namespace {

using models::PosMethod;
using testing::q;
using testing::read_file;
using testing::run_stretch;
using testing::TempDir;

class EvalReliability : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = testing::make_data_bin(*dir_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A tiny ALiBi model matching the data-bin's dictionary, poisoned by `edit`, saved as NAME.
  template <class F>
  static std::string save_edited(const std::string& name, F edit) {
    const data::Dictionary dict = data::Dictionary::load(data_ + "/dict.txt");
    auto model = testing::tiny_model(PosMethod::Alibi, dict.size());
    edit(*model);
    const std::string path = *dir_ / name;
    train::save_checkpoint(path, *model, {.dict_hash = dict.content_hash(), .dictionary = dict.to_text()});
    return path;
  }
  static float* param(models::TransformerLM& m, const std::string& name) {
    return m.params().get(name).value().f32();
  }
  static std::vector<int32_t> valid_stream() {
    auto ds = data::IndexedDataset::open(data_ + "/valid");
    return ds->tokens(0, ds->total_tokens());
  }
  static TempDir* dir_;
  static std::string data_;
};
TempDir* EvalReliability::dir_ = nullptr;
std::string EvalReliability::data_;

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// One NaN row of the input embedding (token k): the first position whose input is k is offset
// m + 1 (m: the first occurrence of k in the stream). Within its window (non-overlapping, L = 8,
// the model's length) the NaN value row reaches every query, the earlier ones too (masked
// attention weights are 0, and 0 · NaN = NaN, as in PyTorch), so the first NaN score is at the
// start of that window. The error names that offset and its target.
TEST_F(EvalReliability, NanScoreIsAnErrorNamingTheFirstPosition) {
  const std::vector<int32_t> s = valid_stream();
  ASSERT_GT(s.size(), 20u);
  const int32_t k = s[10];
  const size_t m = std::find(s.begin(), s.end(), k) - s.begin();
  ASSERT_LT(m + 1, s.size());
  const std::string ck = save_edited("nan_row.pt", [&](models::TransformerLM& model) {
    const int64_t C = model.config().decoder_embed_dim;
    std::fill_n(param(model, "decoder.embed_tokens.weight") + k * C, C, std::numeric_limits<float>::quiet_NaN());
  });
  const size_t first = (m + 1) / 8 * 8;
  const std::string json = *dir_ / "nan.json";
  const auto r = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --path " + q(ck) + " --threads 1 --results-json " +
                             q(json));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "is NaN")) << r.output;
  EXPECT_TRUE(contains(r.output, "stream offset " + std::to_string(first) + " (token id " + std::to_string(s[first]) +
                                     ") is NaN"))
      << "want offset " << first << " target " << s[first] << " in:\n" << r.output;
  EXPECT_TRUE(contains(r.output, ck)) << r.output;
  EXPECT_TRUE(contains(r.output, "hint:")) << r.output;
  EXPECT_FALSE(contains(r.output, "Perplexity")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(json)) << "no results for a failed evaluation";
}

// Scores of +inf (probability 0 in fp32) are dropped as fairseq drops them, and counted. The
// final LayerNorm with weight 0 and bias 1 makes every hidden state all ones, and an output row
// of -3e38 then gives token k a logit of -inf at every position: exactly the targets equal to k
// are dropped, every other score stays finite.
TEST_F(EvalReliability, InfiniteScoresAreDroppedAndCounted) {
  const std::vector<int32_t> s = valid_stream();
  const int32_t k = s[3];
  const int64_t n_k = std::count(s.begin(), s.end(), k);
  ASSERT_GT(n_k, 0);
  const std::string ck = save_edited("inf_row.pt", [&](models::TransformerLM& model) {
    const int64_t C = model.config().decoder_embed_dim;
    std::fill_n(param(model, "decoder.layer_norm.weight"), C, 0.f);
    std::fill_n(param(model, "decoder.layer_norm.bias"), C, 1.f);
    std::fill_n(param(model, "decoder.output_projection.weight") + k * C, C, -3e38f);
  });
  const std::string json = *dir_ / "inf.json";
  const auto r = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --path " + q(ck) + " --threads 1 --results-json " +
                             q(json));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Dropped " + std::to_string(n_k) + " tokens with an infinite score (fairseq drops them too)"))
      << "want " << n_k << " dropped in:\n" << r.output;
  const auto j = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(j.at("dropped_inf").get<int64_t>(), n_k);
  EXPECT_EQ(j.at("count").get<int64_t>(), static_cast<int64_t>(s.size()) - n_k);
  EXPECT_TRUE(std::isfinite(j.at("ppl").get<double>()));
  // A clean model drops nothing and prints no such line.
  const std::string clean = save_edited("clean.pt", [](models::TransformerLM&) {});
  const auto c = run_stretch("eval-lm " + q(data_) + " --gen-subset valid --path " + q(clean) + " --threads 1 --results-json " +
                             q(json));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_FALSE(contains(c.output, "Dropped")) << c.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(json)).at("dropped_inf").get<int64_t>(), 0);
}

// NaN logits from the first step on (a NaN final LayerNorm bias): an error naming the step, no
// text; sampled and greedy alike.
TEST_F(EvalReliability, GenerateStopsOnNanLogitsNamingTheStep) {
  const std::string ck = save_edited("nan_norm.pt", [](models::TransformerLM& model) {
    param(model, "decoder.layer_norm.bias")[0] = std::numeric_limits<float>::quiet_NaN();
  });
  for (const std::string flags : {"", " --temperature 0", " --top-k 3 --top-p 0.5"}) {
    const auto r = run_stretch("generate " + q(data_) + " --path " + q(ck) + " --prompt 'w1 w2' --max-len 5 --threads 1" + flags);
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "NaN (or +inf) at step 1 ")) << flags << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "madeupword")) << flags << "\n" << r.output;
  }
}

TEST_F(EvalReliability, GenerateSamplingFlagsAreCheckedAtStartup) {
  const std::string ck = save_edited("ok.pt", [](models::TransformerLM&) {});
  struct Case {
    std::string flags, needle;
  };
  const std::vector<Case> cases = {
      {"--temperature nan", "--temperature"},  {"--temperature inf", "--temperature"},
      {"--temperature -1", "--temperature"},   {"--temperature 1e39", "--temperature"},
      {"--top-p nan", "--top-p"},              {"--top-p 0", "--top-p"},
      {"--top-p 1.5", "--top-p"},              {"--top-p -0.1", "--top-p"},
      {"--top-k -1", "--top-k"},               {"--temperature abc", "--temperature"},
  };
  for (const auto& c : cases) {
    const auto r = run_stretch("generate " + q(data_) + " --path " + q(ck) + " --max-len 3 --threads 1 " + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.needle)) << c.flags << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "bug in stretch")) << c.flags << "\n" << r.output;
  }
  // The edges of the allowed ranges still run.
  for (const std::string flags : {"--temperature 0", "--top-p 1", "--top-p 1e-7", "--top-k 0", "--temperature 2.5"}) {
    const auto r = run_stretch("generate " + q(data_) + " --path " + q(ck) + " --max-len 3 --threads 1 " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
  }
}

// python3 writes a small zip archive (what torch.save writes since PyTorch 1.6) and a pickle
// (legacy torch.save / fairseq's oldest checkpoints); each command names the file as a PyTorch
// checkpoint, exit 1, instead of misreading its first 8 bytes as a safetensors header length.
TEST_F(EvalReliability, PyTorchFilesAreRecognised) {
  const std::string zip = *dir_ / "fake_zip.pt", pkl = *dir_ / "fake_pickle.pt";
  const std::string py = "python3 -c \"import zipfile, pickle; z = zipfile.ZipFile('" + zip +
                         "', 'w'); z.writestr('archive/data.pkl', pickle.dumps({'model': {}})); z.close(); "
                         "open('" + pkl + "', 'wb').write(pickle.dumps({'args': None, 'model': {'w': [0.0] * 64}}, protocol=2))\"";
  if (std::system(py.c_str()) != 0) GTEST_SKIP() << "python3 is not available to write the files";
  for (const auto& [file, kind] : {std::pair{zip, "zip archive"}, std::pair{pkl, "pickle"}}) {
    for (const std::string& cmd : std::vector<std::string>{"eval-lm " + q(data_) + " --path " + q(file),
                                                          "info " + q(file),
                                                          "generate " + q(data_) + " --path " + q(file)}) {
      const auto r = run_stretch(cmd + " --threads 1");
      EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
      EXPECT_TRUE(contains(r.output, "is a PyTorch checkpoint (" + std::string(kind) + ")")) << cmd << "\n" << r.output;
      EXPECT_TRUE(contains(r.output, file)) << cmd << "\n" << r.output;
      EXPECT_FALSE(contains(r.output, "header length")) << cmd << "\n" << r.output;
    }
  }
}

}  // namespace
}  // namespace stretch::eval
