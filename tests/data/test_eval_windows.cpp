// Evaluation windows (eval_windows.h): both test-vector tables of REFERENCE.md §4.4
// (l = 4, stream t10..t19, pad = 1, eos = 2), batching invariance, the stride form, and
// "every token scored exactly once".
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/eval_windows.h"

namespace stretch::data {
namespace {

using Ids = std::vector<int32_t>;
struct Window {
  Ids input, target;
  int32_t start;
  bool operator==(const Window&) const = default;
};

std::shared_ptr<TokenStream> stream_10_to_19() {
  Ids s;
  for (int32_t t = 10; t <= 19; ++t) s.push_back(t);
  return std::make_shared<MemoryTokenStream>(std::vector<Ids>{s});
}

std::vector<Window> all_windows(EvalWindows& w) {
  std::vector<Window> out;
  Batch b;
  while (w.next(b)) {
    for (int64_t r = 0; r < b.rows(); ++r) {
      const int32_t* in = b.src.i32() + r * b.width();
      const int32_t* tg = b.tgt.i32() + r * b.width();
      out.push_back({Ids(in, in + b.width()), Ids(tg, tg + b.width()), b.starts[static_cast<size_t>(r)]});
    }
  }
  return out;
}

TEST(EvalWindows, ContextWindow3Table) {
  EvalWindows w(stream_10_to_19(), {.tokens_per_sample = 4, .context_window = 3});
  const auto got = all_windows(w);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got[0], (Window{{2, 1, 1, 1}, {10, 1, 1, 1}, 0}));
  EXPECT_EQ(got[1], (Window{{2, 10, 1, 1}, {1, 11, 1, 1}, 1}));
  EXPECT_EQ(got[2], (Window{{2, 10, 11, 1}, {1, 1, 12, 1}, 2}));
  EXPECT_EQ(got[3], (Window{{2, 10, 11, 12}, {1, 1, 1, 13}, 3}));
  EXPECT_EQ(got[4], (Window{{10, 11, 12, 13}, {1, 1, 1, 14}, 3}));
  EXPECT_EQ(got[9], (Window{{15, 16, 17, 18}, {1, 1, 1, 19}, 3}));
}

TEST(EvalWindows, ContextWindow2Table) {
  EvalWindows w(stream_10_to_19(), {.tokens_per_sample = 4, .context_window = 2});
  const auto got = all_windows(w);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0], (Window{{2, 10, 1, 1}, {10, 11, 1, 1}, 0}));
  EXPECT_EQ(got[1], (Window{{2, 10, 11, 12}, {1, 1, 12, 13}, 2}));
  EXPECT_EQ(got[2], (Window{{11, 12, 13, 14}, {1, 1, 14, 15}, 2}));
  EXPECT_EQ(got[3], (Window{{13, 14, 15, 16}, {1, 1, 16, 17}, 2}));
  EXPECT_EQ(got[4], (Window{{15, 16, 17, 18}, {1, 1, 18, 19}, 2}));
}

TEST(EvalWindows, StrideFormAndNoContext) {
  const auto p = EvalWindowParams::from_stride(4, 2);
  EXPECT_EQ(p.context_window, 2);
  EvalWindows w0(stream_10_to_19(), {.tokens_per_sample = 4, .context_window = 0});
  const auto got = all_windows(w0);  // plain §4.3 blocks
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (Window{{2, 10, 11, 12}, {10, 11, 12, 13}, 0}));
  EXPECT_EQ(got[2], (Window{{17, 18}, {18, 19}, 0}));
  EXPECT_THROW(EvalWindowParams::from_stride(4, 0), Error);
  EXPECT_THROW(EvalWindows(stream_10_to_19(), {.tokens_per_sample = 4, .context_window = 4}), Error);
}

// --add-bos-token, worked out by hand from fairseq 0.12.2's LMContextWindowDataset.collater over
// MonolingualDataset(add_bos_token=True) samples (<s> = 0 before each block's source and target),
// with eval_lm's remove_bos_token: the <s> target is not scored (pad here, start one later).
TEST(EvalWindows, AddBosTokenTables) {
  EvalWindowParams p{.tokens_per_sample = 4, .context_window = 0};
  p.add_bos_token = true;
  EvalWindows w0(stream_10_to_19(), p);
  auto got = all_windows(w0);  // block mode: rows of L + 1
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], (Window{{0, 2, 10, 11, 12}, {1, 10, 11, 12, 13}, 1}));
  EXPECT_EQ(got[1], (Window{{0, 13, 14, 15, 16}, {1, 14, 15, 16, 17}, 1}));
  EXPECT_EQ(got[2], (Window{{0, 17, 18}, {1, 18, 19}, 1}));
  EXPECT_EQ(w0.scored_tokens(), 10);

  p.context_window = 2;  // a full block keeps c - 1 = 1 token of context
  EvalWindows w2(stream_10_to_19(), p);
  got = all_windows(w2);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0], (Window{{0, 2, 10, 1, 1}, {1, 10, 11, 1, 1}, 1}));
  EXPECT_EQ(got[1], (Window{{10, 0, 11, 12, 1}, {1, 1, 12, 13, 1}, 2}));
  EXPECT_EQ(got[2], (Window{{12, 0, 13, 14, 1}, {1, 1, 14, 15, 1}, 2}));
  EXPECT_EQ(got[4], (Window{{16, 0, 17, 18, 1}, {1, 1, 18, 19, 1}, 2}));

  p.context_window = 3;  // blocks of 1: the context holds earlier <s> tokens, as fairseq's prev_tokens
  EvalWindows w3(stream_10_to_19(), p);
  got = all_windows(w3);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got[0], (Window{{0, 2, 1, 1, 1}, {1, 10, 1, 1, 1}, 1}));
  EXPECT_EQ(got[1], (Window{{0, 2, 0, 10, 1}, {1, 1, 1, 11, 1}, 3}));
  EXPECT_EQ(got[2], (Window{{0, 10, 0, 11, 1}, {1, 1, 1, 12, 1}, 3}));
  EXPECT_EQ(got[9], (Window{{0, 17, 0, 18, 1}, {1, 1, 1, 19, 1}, 3}));
}

// --sample-break-mode eos with a line longer than max_positions (fairseq-eval-lm skips it,
// filter_indices_by_size): lines "10 11 2", "20 21 22 23 24 2", "30 2", L = 4, c = 1. The long
// line is neither scored nor context: the third line's row starts with the first row's last
// input token (11; prev is taken from input rows), then the third line's source (the skipped
// line's eos, 30). Rows are block + c wide (width 4, then 3).
TEST(EvalWindows, EosBlocksLongerThanMaxPositionsAreSkipped) {
  auto lines = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{10, 11, 2}, {20, 21, 22, 23, 24, 2}, {30, 2}});
  EvalWindows w(lines, {.tokens_per_sample = 4, .context_window = 1, .break_mode = BreakMode::Eos,
                        .max_positions = 4});
  EXPECT_EQ(w.skipped(), (std::vector<int64_t>{1}));
  EXPECT_EQ(w.scored_tokens(), 5);
  const auto got = all_windows(w);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (Window{{2, 10, 11, 1}, {10, 11, 2, 1}, 0}));
  EXPECT_EQ(got[1], (Window{{11, 2, 30}, {1, 30, 2}, 1}));
  // Without the limit the long line is a window of its own (6 targets) and every token is scored.
  EvalWindows all(lines, {.tokens_per_sample = 4, .context_window = 1, .break_mode = BreakMode::Eos});
  EXPECT_TRUE(all.skipped().empty());
  EXPECT_EQ(all.scored_tokens(), 11);
}

TEST(EvalWindows, BatchingDoesNotChangeWindowsAndEveryTokenIsScoredOnce) {
  // A longer stream over several lines, L = 16, every c, several batch sizes.
  std::vector<Ids> items;
  int32_t t = 10;
  for (int line = 0; line < 23; ++line) {
    Ids it;
    for (int k = 0; k < line % 7; ++k) it.push_back(t++);
    it.push_back(2);
    items.push_back(it);
  }
  auto s = std::make_shared<MemoryTokenStream>(items);
  const Ids stream = s->tokens(0, s->total_tokens());
  for (int64_t c : {0, 1, 5, 15}) {
    EvalWindows one(s, {.tokens_per_sample = 16, .context_window = c});
    const auto ref = all_windows(one);
    for (int64_t rows : {3, 7}) {
      EvalWindowParams p{.tokens_per_sample = 16, .context_window = c};
      p.size = {.max_tokens = 0, .max_sentences = rows, .required_batch_size_multiple = 1};
      EvalWindows many(s, p);
      const auto got = all_windows(many);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        // Same window; a batch row may carry extra right padding from a longer neighbour.
        EXPECT_EQ(got[i].start, ref[i].start);
        EXPECT_TRUE(std::equal(ref[i].input.begin(), ref[i].input.end(), got[i].input.begin())) << c << " " << i;
        EXPECT_TRUE(std::equal(ref[i].target.begin(), ref[i].target.end(), got[i].target.begin()));
      }
    }
    // Scored targets, in order, are the whole stream; each input position before a target
    // holds the previous stream token (eos before the first); context is min(c, position).
    Ids scored;
    int64_t pos = 0;
    for (const auto& w : ref) {
      EXPECT_EQ(w.start, std::min<int64_t>(c, pos));
      EXPECT_LE(static_cast<int64_t>(w.input.size()), 16);
      for (size_t j = 0; j < w.target.size(); ++j) {
        if (w.target[j] == 1) continue;
        scored.push_back(w.target[j]);
        EXPECT_EQ(w.input[j], pos == 0 ? 2 : stream[static_cast<size_t>(pos - 1)]);
        ++pos;
      }
    }
    EXPECT_EQ(scored, stream) << "c = " << c;
  }
}

}  // namespace
}  // namespace stretch::data
