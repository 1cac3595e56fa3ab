#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace stretch {

// Philox4x32-10 known-answer vectors from Random123's kat_vectors (philox4x32_10):
// counter {0,0,0,0}, key {0,0} -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8
// counter {ffffffff x4}, key {ffffffff x2} -> 408f276d 41c83b0e a20bc7c6 6d5451fd
TEST(Rng, PhiloxKnownAnswers) {
  auto z = philox4x32(0, 0, 0);
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  auto f = philox4x32(~0ull, ~0ull, ~0ull);
  EXPECT_EQ(f[0], 0x408f276du);
  EXPECT_EQ(f[1], 0x41c83b0eu);
  EXPECT_EQ(f[2], 0xa20bc7c6u);
  EXPECT_EQ(f[3], 0x6d5451fdu);
}

// The SIMD form must equal the scalar one bit for bit: full 16-lane (AVX-512) and 8-lane (AVX2) groups, a tail, and counters
// that carry into the high word (2^32 − 5 ...) or wrap around 2^64.
TEST(Rng, PhiloxBlocksMatchScalar) {
  for (uint64_t lo0 : {uint64_t{0}, uint64_t{12345}, (uint64_t{1} << 32) - 5, ~uint64_t{0} - 7}) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{15}, int64_t{16}, int64_t{37}}) {
      std::vector<uint32_t> out(static_cast<size_t>(n) * 4);
      philox4x32_blocks(0x1234567890abcdefull, 0xfeedull << 20, lo0, n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const auto r = philox4x32(0x1234567890abcdefull, 0xfeedull << 20, lo0 + static_cast<uint64_t>(i));
        for (int j = 0; j < 4; ++j) ASSERT_EQ(out[static_cast<size_t>(i * 4 + j)], r[j]) << "lo0 " << lo0 << " i " << i;
      }
    }
  }
}

TEST(Rng, RestoresFromOffset) {
  Rng a(42, 7);
  for (int i = 0; i < 13; ++i) a.next_u32();
  Rng b(42, 7);
  b.set_offset(a.offset());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.next_u32(), b.next_u32());
}

TEST(Rng, StreamsDiffer) {
  Rng a(1, 0), b(1, 1);
  int same = 0;
  for (int i = 0; i < 64; ++i) same += a.next_u32() == b.next_u32();
  EXPECT_LT(same, 2);
}

TEST(Rng, UniformMomentsAndBelow) {
  Rng r(3);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
    sq += u * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    uint64_t v = r.below(5);
    ASSERT_LT(v, 5u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Error, CheckCarriesFileAndLine) {
  try {
    STRETCH_CHECK(1 == 2, "numbers");
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("test_rng.cpp"), std::string::npos) << m;
    EXPECT_NE(m.find("numbers"), std::string::npos) << m;
    EXPECT_EQ(e.exit_code(), 1);
  }
}

}  // namespace stretch
