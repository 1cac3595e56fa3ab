// Batching (batch_iterator.h, numpy_random.h) and truncated-BPTT streams (bptt_stream.h).
// numpy values were printed by numpy 1.24 (np.random.seed / permutation / shuffle /
// lexsort); batch lists are worked out by hand from fairseq's batch_by_size_fast.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "core/error.h"
#include "data/batch_iterator.h"
#include "data/bptt_stream.h"
#include "data/numpy_random.h"

namespace stretch::data {
namespace {

using Ids = std::vector<int32_t>;
using Batches = std::vector<std::vector<int64_t>>;

std::shared_ptr<TokenStream> counting_stream(int32_t n, int32_t first = 10) {
  Ids s(static_cast<size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return std::make_shared<MemoryTokenStream>(std::vector<Ids>{s});
}

TEST(NumpyRandom, MatchesNumpyLegacyRandomState) {
  // np.random.seed(1); np.random.permutation(10)
  EXPECT_EQ(NumpyRandomState(1).permutation(10), (std::vector<int64_t>{2, 9, 6, 4, 0, 3, 1, 7, 8, 5}));
  // np.random.seed(1); p = np.random.permutation(1000)
  const auto p = NumpyRandomState(1).permutation(1000);
  EXPECT_EQ(std::vector<int64_t>(p.begin(), p.begin() + 8), (std::vector<int64_t>{507, 818, 452, 368, 242, 929, 262, 810}));
  EXPECT_EQ(std::vector<int64_t>(p.end() - 4, p.end()), (std::vector<int64_t>{72, 908, 235, 37}));
  int64_t dot = 0;
  for (int64_t i = 0; i < 1000; ++i) dot += i * p[static_cast<size_t>(i)];
  EXPECT_EQ(dot, 249995299);
  // np.random.seed(4294967295); np.random.permutation(70000): masks wider than 16 bits.
  const auto q = NumpyRandomState(4294967295u).permutation(70000);
  EXPECT_EQ(std::vector<int64_t>(q.begin(), q.begin() + 6), (std::vector<int64_t>{14972, 66828, 49490, 22806, 60806, 3027}));
  int64_t qdot = 0;
  for (int64_t i = 0; i < 70000; ++i) qdot += i * q[static_cast<size_t>(i)];
  EXPECT_EQ(qdot, 85782044852776);
  // np.random.seed(2); l = list(range(10)); np.random.shuffle(l)
  std::vector<int> l(10);
  std::iota(l.begin(), l.end(), 0);
  NumpyRandomState(2).shuffle(l);
  EXPECT_EQ(l, (std::vector<int>{4, 1, 5, 0, 7, 2, 3, 6, 9, 8}));
}

TEST(BatchBySize, RoundsDownToTheRequiredMultiple) {
  std::vector<int64_t> order(37), lengths(37, 512);
  std::iota(order.begin(), order.end(), 0);
  // 9216 / 512 = 18 blocks fit; multiple 8 keeps 16 and carries 2 over (REFERENCE.md §3.1).
  const Batches b8 = batch_by_size(order, lengths, {.max_tokens = 9216, .max_sentences = 0, .required_batch_size_multiple = 8});
  ASSERT_EQ(b8.size(), 3u);
  EXPECT_EQ(b8[0].size(), 16u);
  EXPECT_EQ(b8[1].front(), 16);
  EXPECT_EQ(b8[1].size(), 16u);
  EXPECT_EQ(b8[2], (std::vector<int64_t>{32, 33, 34, 35, 36}));
  const Batches b1 = batch_by_size(order, lengths, {.max_tokens = 9216, .max_sentences = 0, .required_batch_size_multiple = 1});
  ASSERT_EQ(b1.size(), 3u);
  EXPECT_EQ(b1[0].size(), 18u);
  EXPECT_EQ(b1[1].size(), 18u);
  EXPECT_EQ(b1[2], std::vector<int64_t>{36});
}

TEST(BatchBySize, MaxSentencesAndErrors) {
  std::vector<int64_t> order(10), lengths(10, 5);
  std::iota(order.begin(), order.end(), 0);
  const Batches b = batch_by_size(order, lengths, {.max_tokens = 0, .max_sentences = 4, .required_batch_size_multiple = 3});
  EXPECT_EQ(b, (Batches{{0, 1, 2}, {3, 4, 5}, {6, 7, 8, 9}}));
  const Batches c = batch_by_size(order, lengths, {.max_tokens = 0, .max_sentences = 4, .required_batch_size_multiple = 1});
  EXPECT_EQ(c, (Batches{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_THROW(batch_by_size(order, lengths, {.max_tokens = 4, .max_sentences = 0}), Error);
  EXPECT_THROW(batch_by_size(order, lengths, {.max_tokens = 0, .max_sentences = 0}), Error);
}

TEST(BatchIterator, FairseqOrderOfBlocks) {
  // Items of sizes 4,4,4,4,4,2,4,4,4,4 as one block each (eos mode). Under numpy seed 7 the
  // permutation is [8,5,0,2,1,9,7,3,6,4] and np.lexsort([perm, sizes]) = [5,2,4,3,7,9,1,8,6,0].
  std::vector<Ids> items;
  for (int i = 0; i < 10; ++i) items.push_back(i == 5 ? Ids{7, 2} : Ids{7, 7, 7, 2});
  auto blocks = std::make_shared<TokenBlocks>(std::make_shared<MemoryTokenStream>(items),
                                              TokenBlockParams{.block_size = 4, .break_mode = BreakMode::Eos});
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 1, .required_batch_size_multiple = 1};
  p.seed = 7;
  p.epoch_order = EpochOrder::Fixed;
  BatchIterator it(blocks, p);
  EXPECT_EQ(it.frozen_batches(), (Batches{{5}, {2}, {4}, {3}, {7}, {9}, {1}, {8}, {6}, {0}}));
}

std::shared_ptr<TokenBlocks> seven_blocks() {
  return std::make_shared<TokenBlocks>(counting_stream(27), TokenBlockParams{.block_size = 4});
}

TEST(BatchIterator, EpochShuffleFromSeedPlusEpoch) {
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 1, .required_batch_size_multiple = 1};
  p.seed = 1;
  p.index_order = IndexOrder::Natural;
  BatchIterator it(seven_blocks(), p);
  // np.random.seed(1 + 1) / (1 + 2); np.random.shuffle(list(range(7)))
  EXPECT_EQ(it.epoch_schedule(1), (std::vector<int64_t>{4, 1, 3, 2, 6, 5, 0}));
  EXPECT_EQ(it.epoch_schedule(2), (std::vector<int64_t>{4, 6, 5, 3, 1, 0, 2}));
  Batch b;
  ASSERT_TRUE(it.next(b));
  EXPECT_EQ(b.ids, std::vector<int64_t>{4});
  EXPECT_EQ(b.offsets, std::vector<int64_t>{16});
}

TEST(BatchIterator, ResumesExactlyFromASavedPosition) {
  BatchIteratorParams p;
  p.size = {.max_tokens = 8, .max_sentences = 0, .required_batch_size_multiple = 1};
  p.seed = 3;
  auto blocks = std::make_shared<TokenBlocks>(counting_stream(101), TokenBlockParams{.block_size = 4});
  BatchIterator a(blocks, p);
  std::vector<std::vector<int64_t>> first, rest, resumed;
  Batch b;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.next(b));
    first.push_back(b.ids);
  }
  const IteratorState saved = a.state();
  EXPECT_EQ(saved, (IteratorState{1, 5}));
  for (int i = 0; i < 40; ++i) {
    if (!a.next(b)) {
      a.next_epoch();
      ASSERT_TRUE(a.next(b));
    }
    rest.push_back(b.ids);
  }
  BatchIterator c(blocks, p);
  c.set_state(saved);
  for (int i = 0; i < 40; ++i) {
    if (!c.next(b)) {
      c.next_epoch();
      ASSERT_TRUE(c.next(b));
    }
    resumed.push_back(b.ids);
  }
  EXPECT_EQ(resumed, rest);
  // An epoch visits every block once; the next epoch uses another order.
  BatchIterator d(blocks, p);
  std::multiset<int64_t> e1;
  std::vector<std::vector<int64_t>> order1, order2;
  while (d.next(b)) {
    e1.insert(b.ids.begin(), b.ids.end());
    order1.push_back(b.ids);
  }
  EXPECT_EQ(e1.size(), static_cast<size_t>(blocks->size()));
  EXPECT_EQ(std::set<int64_t>(e1.begin(), e1.end()).size(), e1.size());
  d.next_epoch();
  while (d.next(b)) order2.push_back(b.ids);
  EXPECT_NE(order1, order2);
  EXPECT_THROW(d.set_state({1, d.batches_per_epoch() + 1}), Error);
}

TEST(BatchIterator, ShardsSplitTheEpochAndFillWithEmptyBatches) {
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 1, .required_batch_size_multiple = 1};
  p.index_order = IndexOrder::Natural;
  p.num_shards = 2;
  std::multiset<int64_t> seen;
  for (int s = 0; s < 2; ++s) {
    p.shard_id = s;
    BatchIterator it(seven_blocks(), p);
    EXPECT_EQ(it.batches_per_epoch(), 4);
    const auto sched = it.epoch_schedule(1);
    const std::vector<int64_t> all = {4, 1, 3, 2, 6, 5, 0};  // seed 1, epoch 1 (as above)
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t at = 2 * i + s;
      EXPECT_EQ(sched[static_cast<size_t>(i)], at < 7 ? all[static_cast<size_t>(at)] : -1);
    }
    Batch b;
    int n = 0;
    while (it.next(b)) {
      ++n;
      if (b.empty()) {
        EXPECT_EQ(b.ntokens, 0);
      }
      seen.insert(b.ids.begin(), b.ids.end());
    }
    EXPECT_EQ(n, 4);
  }
  EXPECT_EQ(seen, (std::multiset<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(BatchIterator, CollationPadsRightAndCountsTargets) {
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6, 2}, {7, 2}});
  auto blocks = std::make_shared<TokenBlocks>(s, TokenBlockParams{.block_size = 3, .break_mode = BreakMode::Eos});
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 2, .required_batch_size_multiple = 1};
  p.index_order = IndexOrder::Natural;
  BatchIterator it(blocks, p);
  Batch b;
  it.collate({0, 1}, b);
  ASSERT_EQ(b.src.shape(), (Shape{2, 3}));
  EXPECT_EQ(Ids(b.src.i32(), b.src.i32() + 6), (Ids{2, 5, 6, 2, 7, 1}));
  EXPECT_EQ(Ids(b.tgt.i32(), b.tgt.i32() + 6), (Ids{5, 6, 2, 7, 2, 1}));
  EXPECT_EQ(b.lengths, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(b.ntokens, 5);
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 3}));
}

// --add-bos-token: fairseq's MonolingualDataset._maybe_add_bos puts <s> (0) before each sample's
// source and target, then collate right-pads; worked out by hand for the two blocks above.
TEST(BatchIterator, PrependBosAsFairseqMonolingualDataset) {
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6, 2}, {7, 2}});
  auto blocks = std::make_shared<TokenBlocks>(s, TokenBlockParams{.block_size = 3, .break_mode = BreakMode::Eos});
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 2, .required_batch_size_multiple = 1};
  p.index_order = IndexOrder::Natural;
  BatchIterator it(blocks, p);
  Batch b;
  it.collate({0, 1}, b);
  prepend_bos(b, 0);
  ASSERT_EQ(b.src.shape(), (Shape{2, 4}));
  EXPECT_EQ(Ids(b.src.i32(), b.src.i32() + 8), (Ids{0, 2, 5, 6, 0, 2, 7, 1}));
  EXPECT_EQ(Ids(b.tgt.i32(), b.tgt.i32() + 8), (Ids{0, 5, 6, 2, 0, 7, 2, 1}));
  EXPECT_EQ(b.lengths, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(b.ntokens, 7);  // fairseq's sample["ntokens"] = sum(len(source)): the <s> targets count
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 3}));
  Batch empty;
  prepend_bos(empty, 0);
  EXPECT_TRUE(empty.empty());
}

TEST(BatchIterator, BlocksLongerThanMaxPositions) {
  // Lines of 3, 6 and 2 tokens in eos mode; max_positions 4 drops the 6-token line.
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6, 2}, {7, 7, 7, 7, 7, 2}, {8, 2}});
  auto blocks = std::make_shared<TokenBlocks>(s, TokenBlockParams{.block_size = 4, .break_mode = BreakMode::Eos});
  BatchIteratorParams p;
  p.size = {.max_tokens = 0, .max_sentences = 8, .required_batch_size_multiple = 1};
  p.index_order = IndexOrder::Natural;
  p.max_positions = 4;
  BatchIterator it(blocks, p);
  EXPECT_EQ(it.frozen_batches(), (Batches{{0, 2}}));
  p.invalid_sizes = InvalidSizes::Error;
  EXPECT_THROW(BatchIterator(blocks, p), Error);
}

TEST(BpttStreams, FairseqTruncatedBpttLayout) {
  // fairseq's TruncatedBPTTDataset docstring: 16 blocks, bsz_per_shard 2, 3 shards: block ids
  // laid out as [[0,1],[2,3],...,[10,11]] (blocks 12..15 dropped); shard 1 sees
  // (0, [data[4], data[6]]) and (1, [data[5], data[7]]).
  auto s = counting_stream(48, 100);  // 16 blocks of T = 3
  BpttStreams st(s, {.batch_size = 2, .tokens_per_sample = 3, .targets = BpttTargets::WithinBlock,
                     .num_shards = 3, .shard_id = 1});
  ASSERT_EQ(st.num_steps(), 2);
  Batch b;
  st.step(0, b);
  EXPECT_EQ(b.ids, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(Ids(b.src.i32(), b.src.i32() + 6), (Ids{112, 113, 114, 118, 119, 120}));
  EXPECT_EQ(Ids(b.tgt.i32(), b.tgt.i32() + 6), (Ids{113, 114, 1, 119, 120, 1}));
  EXPECT_EQ(b.ntokens, 4);
  st.step(1, b);
  EXPECT_EQ(b.ids, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{16, 22}));  // first targets: S[16] = 116, S[22] = 122
}

TEST(BpttStreams, TransformerXlOrderedIterator) {
  // 20 tokens, B = 2: rows [0..10) and [10..20); T = 4: segments at columns 0, 4, 8 with
  // lengths 4, 4, 1 (range(0, n_step - 1, T) and s = min(T, n_step - 1 - i)).
  auto s = counting_stream(20, 0);
  BpttStreams st(s, {.batch_size = 2, .tokens_per_sample = 4, .targets = BpttTargets::AcrossBlocks});
  ASSERT_EQ(st.num_steps(), 3);
  Batch b;
  st.step(1, b);
  EXPECT_EQ(Ids(b.src.i32(), b.src.i32() + 8), (Ids{4, 5, 6, 7, 14, 15, 16, 17}));
  EXPECT_EQ(Ids(b.tgt.i32(), b.tgt.i32() + 8), (Ids{5, 6, 7, 8, 15, 16, 17, 18}));
  st.step(2, b);
  ASSERT_EQ(b.src.shape(), (Shape{2, 1}));
  EXPECT_EQ(Ids(b.src.i32(), b.src.i32() + 2), (Ids{8, 18}));
  EXPECT_EQ(Ids(b.tgt.i32(), b.tgt.i32() + 2), (Ids{9, 19}));
  EXPECT_THROW(BpttStreams(counting_stream(3), {.batch_size = 4, .tokens_per_sample = 4}), Error);
}

}  // namespace
}  // namespace stretch::data
