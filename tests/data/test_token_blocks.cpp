// TokenBlocks (token_blocks.h): the §4.3 test vector and the eos / complete break modes,
// with expected blocks written out by hand from fairseq's rules.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/token_blocks.h"

namespace stretch::data {
namespace {

using Ids = std::vector<int32_t>;

std::shared_ptr<TokenStream> stream_10_to_19() {
  Ids s;
  for (int32_t t = 10; t <= 19; ++t) s.push_back(t);
  return std::make_shared<MemoryTokenStream>(std::vector<Ids>{s});
}

TEST(TokenBlocks, ReferenceSection43Vector) {
  TokenBlocks b(stream_10_to_19(), {.block_size = 4, .break_mode = BreakMode::None});
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.source(0), (Ids{2, 10, 11, 12}));
  EXPECT_EQ(b.target(0), (Ids{10, 11, 12, 13}));
  EXPECT_EQ(b.source(1), (Ids{13, 14, 15, 16}));
  EXPECT_EQ(b.target(1), (Ids{14, 15, 16, 17}));
  EXPECT_EQ(b.source(2), (Ids{17, 18}));
  EXPECT_EQ(b.target(2), (Ids{18, 19}));
  EXPECT_EQ(b.block_start(2), 8);
  EXPECT_EQ(b.max_block_length(), 4);
}

TEST(TokenBlocks, NoneModeAcrossLines) {
  // Items [5,6,2] [7,2] [8,9,10,2]: stream 5 6 2 7 2 8 9 10 2 (N = 9), L = 3.
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6, 2}, {7, 2}, {8, 9, 10, 2}});
  TokenBlocks b(s, {.block_size = 3, .break_mode = BreakMode::None});
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.target(0), (Ids{5, 6, 2}));
  EXPECT_EQ(b.source(0), (Ids{2, 5, 6}));
  EXPECT_EQ(b.target(1), (Ids{7, 2, 8}));
  EXPECT_EQ(b.source(1), (Ids{2, 7, 2}));  // block 1 starts item 1: eos first (= S[2] anyway)
  EXPECT_EQ(b.target(2), (Ids{9, 10, 2}));
  EXPECT_EQ(b.source(2), (Ids{8, 9, 10}));  // starts mid-item: the previous stream token
  EXPECT_TRUE(b.is_item_start(3));
  EXPECT_FALSE(b.is_item_start(6));
}

TEST(TokenBlocks, ItemStartGetsEosEvenIfThePreviousTokenIsNot) {
  // fairseq prepends eos when a block starts an item, whatever the previous item ended with.
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6}, {7, 8}});
  TokenBlocks b(s, {.block_size = 2, .break_mode = BreakMode::None});
  EXPECT_EQ(b.source(1), (Ids{2, 7}));
}

TEST(TokenBlocks, EosMode) {
  auto s = std::make_shared<MemoryTokenStream>(std::vector<Ids>{{5, 6, 2}, {2}, {8, 9, 10, 11, 12, 2}});
  TokenBlocks b(s, {.block_size = 2, .break_mode = BreakMode::Eos});  // block_size ignored
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.target(1), (Ids{2}));
  EXPECT_EQ(b.source(1), (Ids{2}));
  EXPECT_EQ(b.target(2), (Ids{8, 9, 10, 11, 12, 2}));
  EXPECT_EQ(b.source(2), (Ids{2, 8, 9, 10, 11, 12}));
}

TEST(TokenBlocks, CompleteMode) {
  // Sizes 3, 2, 6, 1, 1 with L = 5: [3+2] [6 alone, longer than L] [1+1].
  auto s = std::make_shared<MemoryTokenStream>(
      std::vector<Ids>{{5, 6, 2}, {7, 2}, {8, 9, 10, 11, 12, 2}, {2}, {2}});
  TokenBlocks b(s, {.block_size = 5, .break_mode = BreakMode::Complete});
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.target(0), (Ids{5, 6, 2, 7, 2}));
  EXPECT_EQ(b.source(0), (Ids{2, 5, 6, 2, 7}));
  EXPECT_EQ(b.block_length(1), 6);
  EXPECT_EQ(b.source(1), (Ids{2, 8, 9, 10, 11, 12}));
  EXPECT_EQ(b.target(2), (Ids{2, 2}));
  EXPECT_EQ(b.source(2), (Ids{2, 2}));
}

TEST(TokenBlocks, BadParams) {
  EXPECT_THROW(TokenBlocks(stream_10_to_19(), {.block_size = 0}), Error);
  EXPECT_EQ(parse_break_mode("complete"), BreakMode::Complete);
  EXPECT_THROW(parse_break_mode("complete_doc"), Error);
}

}  // namespace
}  // namespace stretch::data
