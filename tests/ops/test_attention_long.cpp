// tests/ops/test_attention_long.cpp — attention properties that need larger runs: dropout
// reproducibility across thread counts and seeds, and a long-sequence forward checked row by
// row against the reference (T = 2048 by default, T = 16,384 with STRETCH_LONG=1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "attention_cases.h"
#include "core/threads.h"
#include "ops/attention.h"

namespace stretch::ops {
namespace {

using testing::AttnCase;
using testing::Learn;
using testing::Problem;

struct FwdBwd {
  std::vector<float> out, lse, dq, dk, dv, dslopes;
};

FwdBwd run_fast(const Problem& pb) {
  const AttentionParams p = pb.params();
  FwdBwd r{std::vector<float>(pb.n_q()), std::vector<float>(pb.n_rows()), std::vector<float>(pb.n_q()),
           std::vector<float>(pb.n_kv()), std::vector<float>(pb.n_kv()), std::vector<float>(pb.c.h)};
  attention_forward(r.out.data(), r.lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), AttentionGrads{.dslopes = r.dslopes.data()},
                     pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(), r.out.data(), r.lse.data(), p);
  return r;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved_); }

 private:
  int saved_;
};

// The dropout mask is a function of (seed, stream, b, h, i, j) and every output element is
// summed by one thread in a fixed order, so 1 and 2 threads give bitwise identical results.
TEST(AttentionDropout, IdenticalForOneAndTwoThreads) {
  const Problem pb(AttnCase{.name = "thr", .b = 2, .h = 3, .t = 150, .s = 170, .d = 32,
                            .bias = BiasPolicy::Alibi, .dropout = 0.25f, .learn = Learn::Yes});
  FwdBwd one, two;
  {
    ThreadCount tc(1);
    one = run_fast(pb);
  }
  {
    ThreadCount tc(2);
    two = run_fast(pb);
  }
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.lse, two.lse);
  EXPECT_EQ(one.dq, two.dq);
  EXPECT_EQ(one.dk, two.dk);
  EXPECT_EQ(one.dv, two.dv);
  EXPECT_EQ(one.dslopes, two.dslopes);
}

// With v = identity (D = S) the output row is P ∘ Z: the dropped fraction of visible entries
// is p (2080 visible entries, p = 0.3: σ = 0.01, tolerance 0.05 = 5σ; deterministic anyway),
// kept entries are P/(1 − p), and another seed gives another mask.
TEST(AttentionDropout, DropsFractionPAndDependsOnSeed) {
  const int64_t T = 64, S = 64, D = 64;
  Rng rng(8);
  std::vector<float> q(T * D), k(S * D), v(S * D, 0.f);
  for (auto& x : q) x = rng.uniform(-1, 1);
  for (auto& x : k) x = rng.uniform(-1, 1);
  for (int64_t j = 0; j < S; ++j) v[j * D + j] = 1.f;
  AttentionParams p{.b = 1, .h = 1, .t = T, .s = S, .d = D};
  std::vector<float> plain(T * D), lse(T), dropped(T * D), other(T * D);
  attention_forward(plain.data(), lse.data(), q.data(), k.data(), v.data(), p);
  p.dropout = DropoutParams{.p = 0.3f, .seed = 17, .stream = 2};
  attention_forward(dropped.data(), lse.data(), q.data(), k.data(), v.data(), p);
  p.dropout.seed = 18;
  attention_forward(other.data(), lse.data(), q.data(), k.data(), v.data(), p);
  int64_t visible = 0, zeros = 0, differ = 0;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      ++visible;
      const float d = dropped[i * D + j], pl = plain[i * D + j];
      if (d == 0.f) {
        ++zeros;
      } else {
        EXPECT_NEAR(d, pl / 0.7f, 1e-6f * (1 + pl));
      }
      differ += (d == 0.f) != (other[i * D + j] == 0.f);
    }
  EXPECT_NEAR(static_cast<double>(zeros) / visible, 0.3, 0.05);
  EXPECT_GT(differ, visible / 10);
}

// Long causal ALiBi forward, checked on a few rows: for row i (causal, S = T) the reference run
// with keys 0..i and the single query i computes exactly that row. Tolerance as in
// test_attention.cpp (5e-6 absolute on outputs bounded by 1 here: fp32 sums over ≤ 16k keys).
TEST(AttentionLong, ForwardMatchesReferenceRows) {
  const bool long_form = std::getenv("STRETCH_LONG") != nullptr;
  const int64_t T = long_form ? 16384 : 2048, H = 2, D = 64;
  const Problem pb(AttnCase{.name = "long", .b = 1, .h = H, .t = T, .s = T, .d = D, .bias = BiasPolicy::Alibi});
  const AttentionParams p = pb.params();
  std::vector<float> out(pb.n_q()), lse(pb.n_rows());
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{777}, T / 2 + 3, T - 1}) {
    const int64_t S = i + 1;
    std::vector<float> q1(H * D), k1(H * S * D), v1(H * S * D), o1(H * D), l1(H);
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(pb.q.begin() + (h * T + i) * D, D, q1.begin() + h * D);
      std::copy_n(pb.k.begin() + h * T * D, S * D, k1.begin() + h * S * D);
      std::copy_n(pb.v.begin() + h * T * D, S * D, v1.begin() + h * S * D);
    }
    AttentionParams p1 = p;
    p1.t = 1, p1.s = S;
    ref::attention_forward(o1.data(), l1.data(), q1.data(), k1.data(), v1.data(), p1);
    for (int64_t h = 0; h < H; ++h) {
      EXPECT_NEAR(lse[h * T + i], l1[h], 5e-6 * (1 + std::abs(l1[h]))) << "row " << i;
      for (int64_t d = 0; d < D; ++d) ASSERT_NEAR(out[(h * T + i) * D + d], o1[h * D + d], 5e-6) << "row " << i;
    }
  }
}

}  // namespace
}  // namespace stretch::ops
