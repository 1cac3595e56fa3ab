// --task truncated_bptt_lm (train/lm_data.h, data/bptt_stream.h; REFERENCE.md §6.5) and the
// XL-style memory (--mem-len) through the binary: hand-computed stream layouts, fairseq's
// ntokens = B·T, a kill -9 resume that continues bit for bit (memory included), and eval-lm's
// task with fairseq's refusal of --context-window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "tensor/safetensors.h"
#include "train/checkpoint.h"
#include "train/lm_data.h"
#include "train_test_util.h"

namespace stretch::train {
namespace {

// The training log fields compared update by update (update_lines).
const std::vector<std::string> kLogFields = {"loss", "gnorm", "wpb", "lr"};

using namespace testing;
using Ids = std::vector<int32_t>;

std::shared_ptr<data::TokenStream> counting(int32_t n, int32_t first) {
  Ids s(static_cast<size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return std::make_shared<data::MemoryTokenStream>(std::vector<Ids>{s});
}

Ids row_of(const Tensor& t) { return Ids(t.i32(), t.i32() + t.numel()); }

TEST(BpttBatch, FairseqOrderByHand) {
  // 22 tokens 10..31, T = 4: blocks [10..13] [14..17] [18..21] [22..25] [26..29] [30,31]; B = 2:
  // 6 blocks as [2, 3] rows: stream 0 = blocks 0,1,2, stream 1 = blocks 3,4,5. The last block is
  // short: right-padded, its target [31, pad, pad, pad]. ntokens = B·T = 8 at every step
  // (fairseq's item.numel(), the padding included); the criterion divides by it.
  const data::BpttStreams st(counting(22, 10), {.batch_size = 2, .tokens_per_sample = 4});
  ASSERT_EQ(st.num_steps(), 3);
  LmBatch b = bptt_batch(st, 0);
  EXPECT_EQ(row_of(b.src), (Ids{10, 11, 12, 13, 22, 23, 24, 25}));
  EXPECT_EQ(row_of(b.tgt), (Ids{11, 12, 13, 1, 23, 24, 25, 1}));
  EXPECT_EQ(b.ntokens, 8);
  EXPECT_EQ(b.sample_size, 8);
  b = bptt_batch(st, 2);
  EXPECT_EQ(row_of(b.src), (Ids{18, 19, 20, 21, 30, 31, 1, 1}));
  EXPECT_EQ(row_of(b.tgt), (Ids{19, 20, 21, 1, 31, 1, 1, 1}));
  EXPECT_EQ(b.ntokens, 8);
  // 26 tokens: 7 blocks, trimmed to 6 (a multiple of G = 2): the 7th block [34, 35] is dropped.
  const data::BpttStreams st7(counting(26, 10), {.batch_size = 2, .tokens_per_sample = 4});
  EXPECT_EQ(st7.num_steps(), 3);
  EXPECT_EQ(row_of(bptt_batch(st7, 2).src), (Ids{18, 19, 20, 21, 30, 31, 32, 33}));
}

TEST(BpttBatch, TransformerXlOrderByHand) {
  // 21 tokens 0..20, B = 2: trimmed to 20, rows [0..9] and [10..19]; T = 4: steps at columns 0, 4,
  // 8 of lengths 4, 4, 1; targets are the next token of the row, across segment boundaries.
  const data::BpttStreams st(counting(21, 0),
                             {.batch_size = 2, .tokens_per_sample = 4, .targets = data::BpttTargets::AcrossBlocks});
  ASSERT_EQ(st.num_steps(), 3);
  LmBatch b = bptt_batch(st, 0);
  EXPECT_EQ(row_of(b.src), (Ids{0, 1, 2, 3, 10, 11, 12, 13}));
  EXPECT_EQ(row_of(b.tgt), (Ids{1, 2, 3, 4, 11, 12, 13, 14}));
  EXPECT_EQ(b.ntokens, 8);
  b = bptt_batch(st, 2);
  EXPECT_EQ(row_of(b.src), (Ids{8, 18}));
  EXPECT_EQ(row_of(b.tgt), (Ids{9, 19}));
  EXPECT_EQ(b.ntokens, 2);
}

TEST(BpttTask, SplitIsInOrderEveryEpoch) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const LmData d = open_lm_data(data);
  auto split = open_lm_split(data, "train", d,
                             {.tokens_per_sample = 16, .batch_size = 3, .task = LmTask::TruncatedBptt});
  auto stream = open_split_stream(data, "train", d);
  const int64_t n = stream->total_tokens(), blocks = (n + 15) / 16, per_row = blocks / 3;
  ASSERT_EQ(split->num_batches(), per_row);
  for (int64_t epoch : {1, 2}) {
    split->set_epoch(epoch);
    const LmBatch b = split->batch(1);  // stream r, step 1: block r·per_row + 1
    for (int64_t r = 0; r < 3; ++r) {
      const std::vector<int32_t> want = stream->tokens((r * per_row + 1) * 16, 16);
      EXPECT_EQ(Ids(b.src.i32() + r * 16, b.src.i32() + (r + 1) * 16), want) << "epoch " << epoch << " row " << r;
    }
  }
  EXPECT_THROW(open_lm_split(data, "train", d, {.tokens_per_sample = 16, .task = LmTask::TruncatedBptt}), Error);
}

std::vector<std::string> bptt_train_args(const std::string& data, const std::string& save) {
  return {"train", data, "--task", "truncated_bptt_lm", "--arch", "transformer_lm_tiny", "--decoder-layers", "2",
          "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2",
          "--dropout", "0.1", "--attention-dropout", "0.1", "--tokens-per-sample", "16", "--batch-size", "2",
          "--mem-len", "16", "--optimizer", "adam", "--lr", "0.003", "--clip-norm", "0.5", "--max-update", "14",
          "--save-interval-updates", "5", "--seed", "3", "--log-format", "json", "--log-full-precision",
          "--log-interval", "1", "--threads", "1", "--no-progress-bar", "--save-dir", save};
}

TEST(BpttTask, KillNineResumeContinuesBitIdenticallyWithMemory) {
  TempDir dir;
  const std::string data = make_data_bin(dir);
  const RunResult ref = run_stretch(bptt_train_args(data, dir / "ref"));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_NE(ref.out.find("task: TruncatedBPTTLMTask"), std::string::npos);
  const auto want = update_lines(ref.out, kLogFields);
  ASSERT_EQ(want.size(), 14u);
  EXPECT_EQ(want.at(1).at("wpb"), 32);  // wpb = B·T = 2·16, fairseq's ntokens
  // The memory is in the checkpoint.
  const SafetensorsFile ck = load_safetensors(dir / "ref/checkpoint_last.pt");
  ASSERT_NE(ck.find("segment.mem.0"), nullptr);
  EXPECT_EQ(ck.find("segment.mem.0")->shape(), (Shape{2, 16, 32}));
  {
    Child c(bptt_train_args(data, dir / "killed"), {{"STRETCH_TEST_STALL_AT_UPDATE", "8"}});
    ASSERT_TRUE(c.wait_for_stderr("stretch-test: stalled at update 8"));
    c.signal(SIGKILL);
    c.wait();
  }
  const RunResult r = run_stretch(bptt_train_args(data, dir / "killed"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("at update 5"), std::string::npos) << r.err;
  const auto got = update_lines(r.out, kLogFields);
  ASSERT_EQ(got.size(), 9u);  // updates 6..14
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
  // Without memory the same run trains differently (the memory is used, not only stored).
  std::vector<std::string> args = bptt_train_args(data, dir / "nomem");
  args[std::find(args.begin(), args.end(), "--mem-len") - args.begin() + 1] = "0";
  const RunResult nomem = run_stretch(args);
  ASSERT_EQ(nomem.exit_code, 0) << nomem.err;
  EXPECT_NE(update_lines(nomem.out, kLogFields).at(3).at("loss"), want.at(3).at("loss"));

  // eval-lm with the task: fairseq's count (T − 1 scored per full block), its "Evaluated" B·T,
  // and --context-window refused with fairseq's advice.
  const std::string ckpt = dir / "ref/checkpoint_last.pt";
  const RunResult e = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm", "--batch-size", "2",
                                   "--tokens-per-sample", "16", "--gen-subset", "valid", "--results-json",
                                   dir / "e.json"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  auto valid = open_split_stream(data, "valid", open_lm_data(data));
  const int64_t n = valid->total_tokens(), steps = ((n + 15) / 16) / 2;
  int64_t scored = 0;  // the kept blocks 0 .. 2·steps − 1, each scoring all but its last position
  for (int64_t k = 0; k < 2 * steps; ++k) scored += std::min<int64_t>(16, n - 16 * k) - 1;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "e.json"));
  EXPECT_EQ(j.at("count").get<int64_t>(), scored);
  EXPECT_NE(e.out.find("Evaluated " + std::to_string(steps * 2 * 16) + " tokens"), std::string::npos) << e.out;
  // --num-shards is dropped by fairseq's truncated_bptt batch iterator: the whole split, with a warning.
  const RunResult sharded = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm",
                                         "--batch-size", "2", "--tokens-per-sample", "16", "--gen-subset", "valid",
                                         "--num-shards", "2", "--shard-id", "1", "--results-json", dir / "s.json"});
  ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
  EXPECT_NE(sharded.err.find("--num-shards 2 --shard-id 1 has no effect with --task truncated_bptt_lm"),
            std::string::npos)
      << sharded.err;
  const nlohmann::json js = nlohmann::json::parse(read_file(dir / "s.json"));
  EXPECT_EQ(js.at("count"), j.at("count"));
  EXPECT_EQ(js.at("loss_base2"), j.at("loss_base2"));
  const RunResult bad = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm", "--batch-size",
                                     "2", "--tokens-per-sample", "16", "--context-window", "8"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("don't need a context window"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("mem_len"), std::string::npos) << bad.err;
  // A longer memory at evaluation (--model-overrides, as the seed's mem_len 2100) changes the result.
  const RunResult longer = run_stretch({"eval-lm", data, "--path", ckpt, "--task", "truncated_bptt_lm", "--batch-size",
                                        "2", "--tokens-per-sample", "16", "--gen-subset", "valid", "--model-overrides",
                                        "{'mem_len': 48}", "--results-json", dir / "e48.json"});
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  const nlohmann::json j48 = nlohmann::json::parse(read_file(dir / "e48.json"));
  EXPECT_EQ(j48.at("count"), j.at("count"));
  EXPECT_NE(j48.at("loss_base2"), j.at("loss_base2"));
}

TEST(BpttTask, UsageErrors) {
  TempDir dir;
  const std::string data = make_data_bin(dir, 20);
  RunResult r = run_stretch({"train", data, "--task", "truncated_bptt_lm", "--arch", "transformer_lm_tiny",
                             "--max-tokens", "64", "--tokens-per-sample", "16", "--max-update", "1", "--no-save"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch-size"), std::string::npos) << r.err;
  r = run_stretch({"train", data, "--task", "truncated_bptt_lm", "--arch", "transformer_lm_tiny", "--pos", "sinusoidal",
                   "--mem-len", "8", "--batch-size", "2", "--tokens-per-sample", "16", "--max-update", "1", "--no-save"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mem-len"), std::string::npos) << r.err;
  r = run_stretch({"train", data, "--task", "translation", "--batch-size", "2", "--no-save"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--task"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stretch::train
