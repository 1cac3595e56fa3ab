// --task masked_lm (train/masked_lm_data.h): fairseq's MaskTokensDataset draws against the values
// the real numpy RNG gives for the same seeds (printed by masked_lm_numpy_values.py, with numpy
// 1.24: fairseq's algorithm run on numpy itself), the 80/10/10 shares over many items, the batches
// of a split (<s> first, blocks of L − 1, the <mask> id = dict size, ntokens = masked count,
// epoch 1 for validation, a new draw per training epoch), the flag checks, and `stretch train`
// refusing a task that does not fit the family.
#include <gtest/gtest.h>

#include <vector>

#include "testing.h"
#include "train/masked_lm_data.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

using stretch::testing::error_of;
using stretch::testing::TempDir;

struct NumpyCase {
  uint64_t seed;
  int64_t epoch, index;
  double mask_prob, leave, random;
  std::vector<int32_t> src, tgt;
};

const std::vector<NumpyCase> kNumpy = {
{1, 1, 0, 0.15, 0.1, 0.1,
  {30, 4, 5, 43, 7, 8, 9, 10, 43, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 43, 28, 29, 30, 31, 32, 43, 34, 35, 36, 37, 38, 39, 40, 41, 43},
  {0, 1, 1, 6, 1, 1, 1, 1, 11, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 27, 1, 1, 1, 1, 1, 33, 1, 1, 1, 1, 1, 1, 1, 1, 42}},
{1, 1, 7, 0.15, 0.1, 0.1,
  {0, 4, 5, 6, 7, 8, 43, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 43, 25, 26, 27, 28, 29, 30, 43, 32, 43, 34, 35, 36, 37, 43, 39, 40, 41, 42},
  {1, 1, 1, 1, 1, 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 24, 1, 1, 1, 1, 1, 30, 31, 1, 33, 1, 1, 1, 1, 38, 1, 1, 1, 1}},
{1, 2, 7, 0.15, 0.1, 0.1,
  {0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 43, 24, 25, 26, 43, 43, 29, 30, 31, 32, 33, 34, 12, 36, 37, 43, 39, 40, 41, 42},
  {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 22, 23, 1, 1, 1, 27, 28, 1, 1, 1, 1, 1, 1, 35, 1, 1, 38, 1, 1, 1, 1}},
{3, 1, 123456, 0.5, 0.2, 0.3,
  {43, 4, 43, 6, 7, 8, 9, 10, 11, 12, 13, 43, 15, 16, 17, 34, 32, 43, 21, 43, 23, 24, 43, 26, 43, 28, 29, 43, 19, 43, 43, 15, 35, 36, 37, 27, 39, 40, 41, 42},
  {0, 1, 5, 1, 1, 1, 1, 1, 11, 12, 1, 14, 1, 1, 1, 18, 19, 20, 21, 22, 1, 24, 25, 1, 27, 1, 1, 30, 31, 32, 33, 34, 1, 1, 1, 38, 39, 1, 1, 1}},
{1, 1, 5, 0.4, 0.0, 0.5,
  {0, 21, 5, 6, 7, 8, 27, 10, 11, 43, 13, 42, 43, 16, 24, 18, 43, 40, 43, 22, 5, 24, 8, 26, 23, 17, 15, 30, 31, 32, 33, 34, 35, 36, 43, 38, 39, 40, 41, 37},
  {1, 4, 1, 1, 1, 1, 9, 1, 1, 12, 1, 14, 15, 1, 17, 1, 19, 20, 21, 1, 23, 1, 25, 1, 27, 28, 29, 1, 1, 1, 1, 1, 1, 1, 37, 1, 1, 1, 1, 42}},
{1, 1, 5, 0.4, 0.5, 0.0,
  {0, 4, 5, 6, 7, 8, 9, 10, 11, 43, 13, 14, 43, 16, 17, 18, 43, 20, 43, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 43, 38, 39, 40, 41, 42},
  {1, 4, 1, 1, 1, 1, 9, 1, 1, 12, 1, 14, 15, 1, 17, 1, 19, 20, 21, 1, 23, 1, 25, 1, 27, 28, 29, 1, 1, 1, 1, 1, 1, 1, 37, 1, 1, 1, 1, 42}},
};

TEST(MaskedLm, MaskBlockDrawsWhatNumpyDrawsForFairseq) {
  std::vector<int32_t> item = {0};
  for (int32_t t = 4; t < 43; ++t) item.push_back(t);
  for (const NumpyCase& c : kNumpy) {
    const MaskParams p{.settings = {.mask_prob = c.mask_prob, .leave_unmasked_prob = c.leave, .random_token_prob = c.random},
                       .seed = c.seed, .vocab_size = 44, .mask_idx = 43, .pad = 1};
    std::vector<int32_t> src(item.size()), tgt(item.size());
    const int64_t n = mask_block(item.data(), static_cast<int64_t>(item.size()), c.epoch, c.index, p, src.data(), tgt.data());
    EXPECT_EQ(src, c.src) << c.seed << " " << c.epoch << " " << c.index;
    EXPECT_EQ(tgt, c.tgt) << c.seed << " " << c.epoch << " " << c.index;
    int64_t chosen = 0;
    for (int32_t t : c.tgt) chosen += t != 1;
    EXPECT_EQ(n, chosen);
  }
}

// Over many items: 15% chosen; of those 80% <mask>, 10% unchanged, 10% random (5-sigma bounds).
TEST(MaskedLm, SharesAreFifteenPercentAndEightyTenTen) {
  std::vector<int32_t> item(200);
  for (size_t i = 0; i < item.size(); ++i) item[i] = 4 + static_cast<int32_t>(i % 500);
  const MaskParams p{.seed = 7, .vocab_size = 1000, .mask_idx = 999, .pad = 1};
  double chosen = 0, masked = 0, kept = 0, total = 0;
  std::vector<int32_t> src(item.size()), tgt(item.size());
  for (int64_t k = 0; k < 500; ++k) {
    chosen += static_cast<double>(mask_block(item.data(), 200, 1, k, p, src.data(), tgt.data()));
    total += 200;
    for (size_t i = 0; i < item.size(); ++i) {
      if (tgt[i] == 1) {
        EXPECT_EQ(src[i], item[i]);  // unchosen tokens are never changed
        continue;
      }
      EXPECT_EQ(tgt[i], item[i]);
      masked += src[i] == 999;
      kept += src[i] == item[i];
    }
  }
  EXPECT_NEAR(chosen / total, 0.15, 0.002);  // probabilistic rounding of 0.15 * 200 = 30 exactly
  EXPECT_NEAR(masked / chosen, 0.8, 5 * std::sqrt(0.16 / chosen));
  EXPECT_NEAR(kept / chosen, 0.1 + 0.1 / 996, 5 * std::sqrt(0.09 / chosen));  // random may redraw the same id
}

TEST(MaskedLm, FlagChecksNameTheFlag) {
  auto err = [](MaskSettings s) { return error_of([&] { s.validate(); }); };
  EXPECT_NE(err({.mask_prob = 0.0}).find("--mask-prob 0"), std::string::npos);
  EXPECT_NE(err({.mask_prob = 1.0}).find("--mask-prob 1"), std::string::npos);
  EXPECT_NE(err({.leave_unmasked_prob = -0.1}).find("--leave-unmasked-prob"), std::string::npos);
  EXPECT_NE(err({.random_token_prob = 1.5}).find("--random-token-prob 1.5"), std::string::npos);
  EXPECT_NE(err({.leave_unmasked_prob = 0.6, .random_token_prob = 0.6}).find("sum must be at most 1"), std::string::npos);
  EXPECT_EQ(err({}), "(no error)");
}

TEST(MaskedLm, SplitBatchesAreFairseqItems) {
  TempDir dir;
  const std::string data = testing::make_data_bin(dir);
  const LmData d = open_masked_lm_data(data);
  EXPECT_EQ(d.vocab_size, open_lm_data(data).vocab_size + 1);
  const int32_t mask_idx = static_cast<int32_t>(d.vocab_size - 1);
  LmSplitOptions o{.tokens_per_sample = 16, .batch_size = 4, .shuffle = false, .task = LmTask::MaskedLm};
  auto split = open_lm_split(data, "valid", d, o);
  ASSERT_GT(split->num_batches(), 0);
  const LmBatch b = split->batch(0);
  ASSERT_EQ(b.src.dim(1), 16);  // <s> + 15 tokens
  int64_t scored = 0, masks = 0;
  for (int64_t r = 0; r < b.src.dim(0); ++r) {
    const int32_t first = b.tgt.i32()[r * 16] != 1 ? b.tgt.i32()[r * 16] : b.src.i32()[r * 16];
    EXPECT_EQ(first, 0) << r;  // <s> first (its target, when chosen, is <s> too)
    for (int64_t t = 0; t < 16; ++t) {
      scored += b.tgt.i32()[r * 16 + t] != 1;
      masks += b.src.i32()[r * 16 + t] == mask_idx;
    }
  }
  EXPECT_EQ(b.ntokens, scored);
  EXPECT_EQ(b.sample_size, scored);
  EXPECT_GT(masks, 0);
  EXPECT_LE(masks, scored);
  // Validation draws epoch 1 every time; training redraws per epoch.
  split->set_epoch(1);
  const LmBatch again = split->batch(0);
  EXPECT_TRUE(std::equal(b.src.i32(), b.src.i32() + b.src.numel(), again.src.i32()));
  split->set_epoch(2);
  const LmBatch other = split->batch(0);
  EXPECT_FALSE(std::equal(b.tgt.i32(), b.tgt.i32() + b.tgt.numel(), other.tgt.i32()));
}

TEST(MaskedLm, TrainRefusesATaskThatDoesNotFitTheFamily) {
  TempDir dir;
  const std::string data = testing::make_data_bin(dir, 40);
  auto r = testing::run_stretch({"train", data, "--task", "masked_lm", "--arch", "transformer_lm_tiny",
                                          "--max-tokens", "256", "--tokens-per-sample", "16", "--max-update", "1",
                                          "--save-dir", dir / "ck"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--task masked_lm needs an encoder"), std::string::npos) << r.err;
  r = testing::run_stretch({"train", data, "--arch", "roberta_tiny", "--max-tokens", "256",
                                     "--tokens-per-sample", "16", "--max-update", "1", "--save-dir", dir / "ck"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("trains with --task masked_lm"), std::string::npos) << r.err;
  r = testing::run_stretch({"train", data, "--task", "masked_lm", "--arch", "roberta_tiny", "--mask-prob",
                                     "1.5", "--max-tokens", "256", "--tokens-per-sample", "16", "--max-update", "1",
                                     "--save-dir", dir / "ck"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mask-prob 1.5"), std::string::npos) << r.err;
  // The decoder's ALiBi variants are refused for the encoder, naming the flag and the arch.
  r = testing::run_stretch({"train", data, "--task", "masked_lm", "--arch", "roberta_tiny", "--alibi-shape", "log",
                            "--max-tokens", "256", "--tokens-per-sample", "16", "--max-update", "1",
                            "--save-dir", dir / "ck"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--alibi-shape (model config key 'alibi_shape'): not supported by --arch roberta_tiny"),
            std::string::npos) << r.err;
}

// A short run learns: the masked-token validation loss falls by more than 0.25 bits between the
// first validation (update 4) and the last (update 100), dropout off, so the change is the training's.
TEST(MaskedLm, ShortTrainingRunLearns) {
  TempDir dir;
  const std::string data = testing::make_data_bin(dir, 200);
  const auto r = testing::run_stretch(
      {"train", data, "--task", "masked_lm", "--arch", "roberta_tiny", "--encoder-embed-dim", "32",
       "--encoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2", "--dropout", "0", "--attention-dropout", "0",
       "--max-tokens", "512", "--tokens-per-sample", "32", "--optimizer", "adam", "--lr", "0.003", "--max-update", "100",
       "--log-format", "json", "--log-interval", "100", "--save-dir", dir / "ck", "--no-progress-bar"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> valid;
  for (const auto& j : testing::json_lines(r.out))
    if (j.contains("valid_loss")) valid.push_back(j.at("valid_loss").get<double>());
  ASSERT_GE(valid.size(), 2u) << r.out;
  EXPECT_LT(valid.back(), valid.front() - 0.25) << valid.front() << " -> " << valid.back();

  // eval-lm --task masked_lm: the validation masks (seed 1, epoch 1) at the training length give
  // the last validation's loss; twice the length runs (symmetric ALiBi extrapolates).
  const std::string ck = dir / "ck/checkpoint_last.pt";
  auto e = testing::run_stretch({"eval-lm", data, "--path", ck, "--task", "masked_lm", "--gen-subset", "valid",
                                 "--results-json", dir / "r32.json", "--log-format", "none"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("Loss (base 2): "), std::string::npos) << e.out;
  const nlohmann::json r32 = nlohmann::json::parse(stretch::testing::read_file(dir / "r32.json"));
  EXPECT_EQ(r32.at("protocol"), "masked_lm");
  EXPECT_GT(r32.at("count").get<int64_t>(), 0);
  EXPECT_NEAR(r32.at("loss_base2").get<double>(), valid.back(), 2e-3);  // fairseq logs {:.3f}
  e = testing::run_stretch({"eval-lm", data, "--path", ck, "--task", "masked_lm", "--gen-subset", "valid",
                            "--tokens-per-sample", "64", "--log-format", "none"});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  // --alibi-interpolate at 2 L_train: slopes x 32 / 64, the numbers of --model-overrides
  // alibi_slope_scale 0.5 (the same model by another route) and not those without it.
  auto masked64 = [&](std::vector<std::string> extra, const std::string& json) {
    std::vector<std::string> a = {"eval-lm", data, "--path", ck, "--task", "masked_lm", "--gen-subset", "valid",
                                  "--tokens-per-sample", "64", "--log-format", "none", "--results-json", json};
    a.insert(a.end(), extra.begin(), extra.end());
    return testing::run_stretch(a);
  };
  e = masked64({"--alibi-interpolate"}, dir / "i64.json");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("ALiBi position interpolation: slopes x 32 / 64 = 0.5"), std::string::npos) << e.out;
  const nlohmann::json i64 = nlohmann::json::parse(stretch::testing::read_file(dir / "i64.json"));
  EXPECT_EQ(i64.at("alibi_slope_scale").get<double>(), 0.5);
  ASSERT_EQ(masked64({"--model-overrides", "{'alibi_slope_scale': 0.5}"}, dir / "o64.json").exit_code, 0);
  ASSERT_EQ(masked64({}, dir / "p64.json").exit_code, 0);
  const nlohmann::json o64 = nlohmann::json::parse(stretch::testing::read_file(dir / "o64.json"));
  const nlohmann::json p64 = nlohmann::json::parse(stretch::testing::read_file(dir / "p64.json"));
  EXPECT_EQ(i64.at("nll_sum_nats").get<double>(), o64.at("nll_sum_nats").get<double>());
  EXPECT_NE(i64.at("nll_sum_nats").get<double>(), p64.at("nll_sum_nats").get<double>());
  e = masked64({"--alibi-interpolate", "--model-overrides", "{'alibi_slope_scale': 0.5}"}, dir / "x.json");
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("--alibi-interpolate and --model-overrides alibi_slope_scale"), std::string::npos) << e.err;
  // A decoder's protocol on an encoder, and decoder-only options, are usage errors.
  e = testing::run_stretch({"eval-lm", data, "--path", ck});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("--task masked_lm"), std::string::npos) << e.err;
  e = testing::run_stretch({"eval-lm", data, "--path", ck, "--task", "masked_lm", "--context-window", "8"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("--context-window"), std::string::npos) << e.err;
  // sweep and generate score or sample the next token: an encoder is refused by name, not as a
  // dictionary mismatch (its vocabulary has <mask> appended).
  e = testing::run_stretch({"sweep", data, "--path", ck, "--lengths", "32,64", "--results-dir", dir / "sw"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("sweep: " + ck + " is a roberta encoder (--arch roberta_tiny)"), std::string::npos) << e.err;
  e = testing::run_stretch({"generate", data, "--path", ck, "--max-len", "4"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find("generate: " + ck + " is a roberta encoder"), std::string::npos) << e.err;
}

}  // namespace
}  // namespace stretch::train
