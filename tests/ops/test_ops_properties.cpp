// tests/ops/test_ops_properties.cpp — properties and hand-computed values, independent of the
// reference implementations: thread-count determinism (dropout mask, embedding/layernorm/linear
// parameter gradients), dropout keep rate, known function values, RoPE rotation properties,
// fairseq's sinusoidal table, and clear errors on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "ops/activation.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "ops/op_test_registry.h"
#include "ops/rope.h"
#include "ops/sinusoidal.h"

namespace stretch::ops {
namespace {

using testing::random_floats;
using testing::random_ids;

// Runs fn with 1 thread and with 2 threads; restores the previous count.
template <class Fn>
void with_threads(int n, Fn fn) {
  const int before = num_threads();
  set_num_threads(n);
  fn();
  set_num_threads(before);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Dropout, MaskIsIdenticalForOneAndTwoThreads) {
  const int64_t n = 1 << 20;
  const DropoutParams p{.p = 0.3f, .seed = 1234, .stream = 7};
  const auto inp = random_floats(n, 1, 0.5f, 1.5f);  // never 0, so out == 0 ⇔ dropped
  std::vector<float> out1(n), out2(n), din1(n, 0.f), din2(n, 0.f);
  with_threads(1, [&] {
    dropout_forward(out1.data(), inp.data(), n, p);
    dropout_backward(din1.data(), inp.data(), n, p);
  });
  with_threads(2, [&] {
    dropout_forward(out2.data(), inp.data(), n, p);
    dropout_backward(din2.data(), inp.data(), n, p);
  });
  EXPECT_TRUE(bitwise_equal(out1, out2));
  EXPECT_TRUE(bitwise_equal(din1, din2));
  int64_t kept = 0;
  const float scale = 1.f / (1.f - p.p);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = dropout_keep(p, i);
    kept += keep;
    ASSERT_EQ(out1[i], keep ? inp[i] * scale : 0.f) << i;
  }
  // Binomial: σ(rate) = √(p(1−p)/n) = 4.5e-4; 5σ = 2.3e-3.
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p.p, 2.3e-3);
}

TEST(Dropout, KeepRateForSeveralP) {
  const int64_t n = 200000;
  for (float pr : {0.1f, 0.5f, 0.9f}) {
    const DropoutParams p{.p = pr, .seed = 5, .stream = 1};
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) kept += dropout_keep(p, i);
    const double sigma = std::sqrt(pr * (1.0 - pr) / n);
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - pr, 5 * sigma) << "p=" << pr;
  }
}

TEST(Dropout, Keep4AgreesWithKeepAndStreamsDiffer) {
  const DropoutParams a{.p = 0.5f, .seed = 3, .stream = 0}, b{.p = 0.5f, .seed = 3, .stream = 1};
  int differ = 0;
  for (int64_t blk = 0; blk < 256; ++blk) {
    const uint32_t bits = dropout_keep4(a, blk);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(((bits >> j) & 1u) != 0, dropout_keep(a, 4 * blk + j));
    differ += bits != dropout_keep4(b, blk);
  }
  EXPECT_GT(differ, 128);  // another stream is another mask
}

TEST(Dropout, RejectsBadP) {
  float x = 1.f, y;
  EXPECT_THROW(dropout_forward(&y, &x, 1, DropoutParams{.p = 1.f}), Error);
  EXPECT_THROW(dropout_forward(&y, &x, 1, DropoutParams{.p = -0.1f}), Error);
}

TEST(Determinism, ParameterGradientsAreIdenticalForOneAndTwoThreads) {
  const EmbeddingDims ed{.n = 4096, .v = 300, .c = 200};
  const auto ids = random_ids(ed.n, 300, 2);
  const auto dout = random_floats(ed.n * ed.c, 3);
  std::vector<float> t1(ed.v * ed.c, 0.f), t2(ed.v * ed.c, 0.f);
  with_threads(1, [&] { embedding_backward(t1.data(), dout.data(), ids.data(), 2.f, ed); });
  with_threads(2, [&] { embedding_backward(t2.data(), dout.data(), ids.data(), 2.f, ed); });
  EXPECT_TRUE(bitwise_equal(t1, t2)) << "embedding dtable";

  const LayerNormDims ld{.n = 1000, .c = 96};
  const auto x = random_floats(ld.n * ld.c, 4), w = random_floats(ld.c, 5), g = random_floats(ld.n * ld.c, 6);
  std::vector<float> y(ld.n * ld.c), mean(ld.n), rstd(ld.n);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), ld);
  std::vector<float> dw1(ld.c, 0.f), db1(ld.c, 0.f), dw2(ld.c, 0.f), db2(ld.c, 0.f);
  with_threads(1, [&] {
    layernorm_backward(nullptr, dw1.data(), db1.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), ld);
  });
  with_threads(2, [&] {
    layernorm_backward(nullptr, dw2.data(), db2.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(), ld);
  });
  EXPECT_TRUE(bitwise_equal(dw1, dw2)) << "layernorm dweight";
  EXPECT_TRUE(bitwise_equal(db1, db2)) << "layernorm dbias";

  const LinearDims lin{.n = 1000, .in_features = 8, .out_features = 100};
  const auto go = random_floats(lin.n * lin.out_features, 7);
  std::vector<float> b1(100, 0.f), b2(100, 0.f);
  with_threads(1, [&] { linear_backward(nullptr, nullptr, b1.data(), go.data(), nullptr, nullptr, lin); });
  with_threads(2, [&] { linear_backward(nullptr, nullptr, b2.data(), go.data(), nullptr, nullptr, lin); });
  EXPECT_TRUE(bitwise_equal(b1, b2)) << "linear dbias";
}

// LinearDims::block / skip (a layer's detached memory rows): backward writes no dinp in the first
// `skip` rows of each block (they keep what they held), the other rows get what the reference
// gives them, and dweight / dbias are bitwise those of the full backward. fp32 and bf16.
TEST(Linear, SkippedRowsGetNoInputGradient) {
  const int64_t B = 3, R = 7, skip = 3, N = B * R, I = 10, O = 6;
  const std::vector<float> x = random_floats(N * I, 41), w = random_floats(O * I, 42), go = random_floats(N * O, 43);
  const LinearDims full{.n = N, .in_features = I, .out_features = O};
  LinearDims part = full;
  part.block = R, part.skip = skip;
  auto kept = [&](int64_t row) { return row % R >= skip; };
  for (const GemmPrecision prec : {GemmPrecision::Fp32, GemmPrecision::Bf16}) {
    if (prec == GemmPrecision::Bf16 && !bf16_matmul_supported()) continue;  // the fp32 half still ran
    SCOPED_TRACE(prec == GemmPrecision::Bf16 ? "bf16" : "fp32");
    set_matmul_precision(prec);
    std::vector<float> dx_full(N * I, 7.f), dw_full(O * I, 0.f), db_full(O, 0.f);
    std::vector<float> dx_part(N * I, 7.f), dw_part(O * I, 0.f), db_part(O, 0.f);
    linear_backward(dx_full.data(), dw_full.data(), db_full.data(), go.data(), x.data(), w.data(), full);
    linear_backward(dx_part.data(), dw_part.data(), db_part.data(), go.data(), x.data(), w.data(), part);
    set_matmul_precision(GemmPrecision::Fp32);
    EXPECT_TRUE(bitwise_equal(dw_full, dw_part)) << "dweight";
    EXPECT_TRUE(bitwise_equal(db_full, db_part)) << "dbias";
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) {
        const float got = dx_part[n * I + i], want = dx_full[n * I + i];
        if (kept(n))
          ASSERT_NEAR(got, want, 1e-5f * (1.f + std::abs(want))) << "row " << n << " col " << i;
        else
          ASSERT_EQ(got, 7.f) << "skipped row " << n << " was written";
      }
  }
  // The reference honours the same rows (the oracle of the op registry's linear cases).
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), god(go.begin(), go.end());
  std::vector<double> r_full(N * I, 0.0), r_part(N * I, 7.0);
  ref::linear_backward(r_full.data(), nullptr, nullptr, god.data(), xd.data(), wd.data(), full);
  ref::linear_backward(r_part.data(), nullptr, nullptr, god.data(), xd.data(), wd.data(), part);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < I; ++i)
      ASSERT_EQ(r_part[n * I + i], kept(n) ? 7.0 + r_full[n * I + i] : 7.0) << "reference row " << n;
  std::vector<float> dx(N * I);
  LinearDims bad = full;
  bad.block = R, bad.skip = R;
  EXPECT_THROW(linear_backward(dx.data(), nullptr, nullptr, go.data(), x.data(), w.data(), bad), Error);
  bad.block = 4, bad.skip = 1;  // 21 rows are not blocks of 4
  EXPECT_THROW(linear_backward(dx.data(), nullptr, nullptr, go.data(), x.data(), w.data(), bad), Error);
}

// linear_backward's two schedules with 2 threads (ops/linear.h: LinearBackwardSchedule), on every
// GEMM route: Concurrent gives dinp and dweight exactly the bits one thread gives (each product ran
// on one thread, and nothing else was summed), both schedules match the double reference, the +=
// contract holds (dinp, dweight, dbias start non-zero), and the skipped rows of a block stay unwritten.
TEST(Linear, BackwardSchedulesMatchReferenceAndConcurrentIsOneThreadBits) {
  const LinearBackwardSchedule saved_schedule = linear_backward_schedule();
  const GemmLibrary saved_library = gemm_library();
  const int64_t N = 300, I = 96, O = 80;
  const std::vector<float> x = random_floats(N * I, 51), w = random_floats(O * I, 52), go = random_floats(N * O, 53);
  const std::vector<float> dx0 = random_floats(N * I, 54), dw0 = random_floats(O * I, 55), db0 = random_floats(O, 56);
  for (const bool skip_rows : {false, true}) {
    LinearDims d{.n = N, .in_features = I, .out_features = O};
    if (skip_rows) d.block = 100, d.skip = 30;
    auto kept = [&](int64_t row) { return !skip_rows || row % d.block >= d.skip; };
    // The double reference: dx0 + go·W on kept rows, dw0 + goᵀ·x, db0 + Σ go.
    std::vector<double> rdx(N * I, 0.0), rdw(O * I, 0.0), rdb(O, 0.0);
    {
      const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), god(go.begin(), go.end());
      ref::linear_backward(rdx.data(), rdw.data(), rdb.data(), god.data(), xd.data(), wd.data(),
                           LinearDims{.n = N, .in_features = I, .out_features = O});
    }
    for (const GemmLibrary lib : {GemmLibrary::OneDnn, GemmLibrary::Mixed, GemmLibrary::OpenBlas}) {
      set_gemm_library(lib);
      struct Grads { std::vector<float> dx, dw, db; };
      auto run = [&](int threads, LinearBackwardSchedule s) {
        Grads g{dx0, dw0, db0};
        set_linear_backward_schedule(s);
        with_threads(threads, [&] {
          linear_backward(g.dx.data(), g.dw.data(), g.db.data(), go.data(), x.data(), w.data(), d);
        });
        return g;
      };
      const Grads one = run(1, LinearBackwardSchedule::Sequential);
      const Grads conc = run(2, LinearBackwardSchedule::Concurrent);
      const Grads seq = run(2, LinearBackwardSchedule::Sequential);
      const std::string where = std::string(gemm_library_name(lib)) + (skip_rows ? ", skipped rows" : "");
      EXPECT_TRUE(bitwise_equal(conc.dx, one.dx)) << "concurrent dinp is not the 1-thread bits: " << where;
      EXPECT_TRUE(bitwise_equal(conc.dw, one.dw)) << "concurrent dweight is not the 1-thread bits: " << where;
      EXPECT_TRUE(bitwise_equal(conc.db, seq.db)) << "dbias depends on the schedule: " << where;
      for (const Grads* g : {&conc, &seq}) {
        const char* name = g == &conc ? "concurrent" : "sequential";
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < I; ++i) {
            const double want = dx0[n * I + i] + (kept(n) ? rdx[n * I + i] : 0.0);
            ASSERT_NEAR(g->dx[n * I + i], want, 1e-4 * (1 + std::abs(want))) << name << " dinp " << n << "," << i
                                                                              << " " << where;
          }
        for (int64_t j = 0; j < O * I; ++j)
          ASSERT_NEAR(g->dw[j], dw0[j] + rdw[j], 1e-4 * (1 + std::abs(rdw[j]))) << name << " dweight " << j << " "
                                                                                << where;
        for (int64_t o = 0; o < O; ++o)
          ASSERT_NEAR(g->db[o], db0[o] + rdb[o], 1e-4 * (1 + std::abs(rdb[o]))) << name << " dbias " << o;
      }
    }
  }
  // An error inside a concurrent product reaches the caller (an exception may not leave an OpenMP
  // region: it would terminate the process). bf16 products throw a usage error where the CPU has no
  // bf16 matmul; elsewhere they run, and the schedule's bits are checked by the bf16 model tests.
  if (!bf16_matmul_supported()) {
    set_linear_backward_schedule(LinearBackwardSchedule::Concurrent);
    set_matmul_precision(GemmPrecision::Bf16);
    std::vector<float> dx(N * I, 0.f), dw(O * I, 0.f);
    with_threads(2, [&] {
      EXPECT_THROW(linear_backward(dx.data(), dw.data(), nullptr, go.data(), x.data(), w.data(),
                                   LinearDims{.n = N, .in_features = I, .out_features = O}),
                   Error);
    });
    set_matmul_precision(GemmPrecision::Fp32);
  }
  set_linear_backward_schedule(saved_schedule);
  set_gemm_library(saved_library);
}

TEST(KnownValues, Gelu) {
  // gelu(x) = x·Φ(x): Φ(1) = 0.8413447460685429, Φ(−1) = 0.15865525393145707, Φ(3) = 0.9986501019683699.
  const float x[4] = {0.f, 1.f, -1.f, 3.f};
  float y[4], yr[4];
  activation_forward(y, x, 4, Activation::Gelu);
  ref::activation_forward(yr, x, 4, Activation::Gelu);
  const double want[4] = {0.0, 0.8413447460685429, -0.15865525393145707, 3 * 0.9986501019683699};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], want[i], 1e-6) << i;
    EXPECT_NEAR(yr[i], want[i], 1e-7) << i;
  }
  // gelu'(0) = ½; relu'(0) = 0 (torch's convention).
  float g = 0.f, one = 1.f, zero = 0.f;
  activation_backward(&g, &one, &zero, 1, Activation::Gelu);
  EXPECT_FLOAT_EQ(g, 0.5f);
  g = 0.f;
  activation_backward(&g, &one, &zero, 1, Activation::Relu);
  EXPECT_EQ(g, 0.f);
}

TEST(KnownValues, TanhActivations) {
  // fairseq's gelu_accurate ½x(1 + tanh(√(2/π)(x + 0.044715x³))) at ±1, ±3 (torch.nn.functional.gelu(x,
  // approximate="tanh") prints the same: 0.8412, −0.1588, 2.9964, −0.0036); tanh(±1), tanh(±3).
  const float x[4] = {1.f, -1.f, 3.f, -3.f};
  const double ga[4] = {0.8411919906082768, -0.15880800939172324, 2.996362607918227, -0.0036373920817729943};
  const double th[4] = {0.7615941559557649, -0.7615941559557649, 0.9950547536867305, -0.9950547536867305};
  for (auto [act, want] : {std::pair{Activation::GeluAccurate, ga}, std::pair{Activation::Tanh, th}}) {
    float y[4], yr[4], yl[4];
    activation_forward(y, x, 4, act);
    ref::activation_forward(yr, x, 4, act);
    activation_forward(yl, x, 4, Activation::Linear);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(y[i], want[i], 1e-6) << activation_name(act) << " " << x[i];
      EXPECT_NEAR(yr[i], want[i], 1e-7) << activation_name(act) << " " << x[i];
      EXPECT_EQ(yl[i], x[i]);
    }
  }
  // Slopes at 1: gelu_accurate'(1) = 1.0829640838 (central difference of the formula in double),
  // tanh'(1) = 1 − tanh²(1) = 0.4199743416; linear' = 1. Overwrite and accumulate.
  const float one = 1.f, three = 3.f;
  float g = 0.f;
  activation_backward(&g, &three, &one, 1, Activation::GeluAccurate, GradInit::Overwrite);
  EXPECT_NEAR(g, 3 * 1.0829640838, 1e-5);
  g = 1.f;
  activation_backward(&g, &one, &one, 1, Activation::Tanh);
  EXPECT_NEAR(g, 1 + 0.4199743416, 1e-6);
  g = 1.f;
  activation_backward(&g, &three, &one, 1, Activation::Linear);
  EXPECT_EQ(g, 4.f);
}

TEST(ActivationNames, FairseqNamesRoundTripAndGeluFastIsGeluAccurate) {
  for (const char* name : {"relu", "gelu", "gelu_accurate", "tanh", "linear"}) {
    const auto a = activation_from_name(name);
    ASSERT_TRUE(a.has_value()) << name;
    EXPECT_STREQ(activation_name(*a), name);
  }
  EXPECT_EQ(activation_from_name("gelu_fast"), Activation::GeluAccurate);
  for (const char* name : {"swish", "relu_squared", "GELU", "", "gelu "}) EXPECT_FALSE(activation_from_name(name)) << name;
}

TEST(KnownValues, LayerNorm) {
  // x = [1, 2, 3, 4]: mean 2.5, biased var 1.25.
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 1}, b[4] = {0, 0, 0, 1};
  float y[4], m, r;
  layernorm_forward(y, &m, &r, x, w, b, LayerNormDims{.n = 1, .c = 4});
  const double rs = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(m, 2.5, 1e-7);
  EXPECT_NEAR(r, rs, 1e-6);
  const double want[4] = {-1.5 * rs, -0.5 * rs, 2 * 0.5 * rs, 1.5 * rs + 1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

TEST(KnownValues, CrossEntropy) {
  // logits [0, ln 2, ln 3] → softmax [1/6, 2/6, 3/6]; target 2 → loss −ln ½ = ln 2.
  const float logits[6] = {0.f, std::log(2.f), std::log(3.f), 5.f, 5.f, 5.f};
  const int32_t targets[2] = {2, 0};
  float losses[2], lse[2];
  const CrossEntropyDims d{.n = 2, .v = 3, .ignore_index = 1, .reduction = Reduction::Mean};
  const CrossEntropyResult r = cross_entropy_forward(losses, lse, logits, targets, d);
  EXPECT_NEAR(losses[0], std::log(2.0), 1e-6);
  EXPECT_NEAR(losses[1], std::log(3.0), 1e-6);  // uniform over 3
  EXPECT_NEAR(lse[0], std::log(6.0), 1e-6);
  EXPECT_EQ(r.count, 2);
  EXPECT_NEAR(r.loss, (std::log(2.0) + std::log(3.0)) / 2, 1e-6);
  float g[6] = {};
  cross_entropy_backward(g, logits, lse, targets, 1.f, r.count, d);
  const double want[6] = {1 / 12., 2 / 12., 3 / 12. - 0.5, 1 / 6. - 0.5, 1 / 6., 1 / 6.};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(g[i], want[i], 1e-6) << i;
}

TEST(KnownValues, CrossEntropyAllIgnored) {
  const float logits[4] = {1, 2, 3, 4};
  const int32_t targets[2] = {1, 1};
  float lse[2], g[4] = {};
  const CrossEntropyDims d{.n = 2, .v = 2, .ignore_index = 1, .reduction = Reduction::Mean};
  const CrossEntropyResult r = cross_entropy_forward(nullptr, lse, logits, targets, d);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(r.loss, 0.0);
  cross_entropy_backward(g, logits, lse, targets, 1.f, r.count, d);
  for (float v : g) EXPECT_EQ(v, 0.f);
}

TEST(KnownValues, CrossEntropyIsStableForHugeLogits) {
  // exp(1e4) overflows float; the shifted computation must not. Logits [1e4, 1e4 − ln 3] → p = [¾, ¼].
  const float logits[2] = {1e4f, 1e4f - std::log(3.f)};
  const int32_t t = 1;
  float loss, lse;
  cross_entropy_forward(&loss, &lse, logits, &t, CrossEntropyDims{.n = 1, .v = 2});
  EXPECT_NEAR(loss, std::log(4.0), 2e-3);  // 1e4·u ≈ 1e-3 absolute lost in x − lse
}

TEST(Rope, HandValuesAndProperties) {
  // D = 2: a single pair rotated by θ = pos (inv_freq = 1).
  const float x[2] = {1.f, 0.f};
  float y[2];
  rope_forward(y, x, RopeDims{.b = 1, .h = 1, .t = 1, .d = 2, .pos0 = 7});
  EXPECT_NEAR(y[0], std::cos(7.0), 1e-6);
  EXPECT_NEAR(y[1], std::sin(7.0), 1e-6);
  // Relative positions: <rope(q, m), rope(k, n)> depends only on m − n, here for D = 64 and m − n = 5.
  const int64_t D = 64;
  const auto q = random_floats(D, 1), k = random_floats(D, 2);
  auto score = [&](int64_t m, int64_t n) {
    std::vector<float> qr(D), kr(D);
    rope_forward(qr.data(), q.data(), RopeDims{.b = 1, .h = 1, .t = 1, .d = D, .pos0 = m});
    rope_forward(kr.data(), k.data(), RopeDims{.b = 1, .h = 1, .t = 1, .d = D, .pos0 = n});
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += static_cast<double>(qr[i]) * kr[i];
    return s;
  };
  EXPECT_NEAR(score(8, 3), score(1005, 1000), 1e-5);
  EXPECT_NEAR(score(8, 3), score(16389, 16384), 1e-5);
  // Backward is the inverse rotation: backward(forward(x)) = x; in place forward works.
  const RopeDims d{.b = 2, .h = 3, .t = 5, .d = 8, .pos0 = 11};
  const auto v = random_floats(2 * 3 * 5 * 8, 3);
  std::vector<float> f(v.size()), back(v.size(), 0.f), inplace = v;
  rope_forward(f.data(), v.data(), d);
  rope_backward(back.data(), f.data(), d);
  rope_forward(inplace.data(), inplace.data(), d);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(back[i], v[i], 1e-6) << i;
    EXPECT_EQ(inplace[i], f[i]) << i;
  }
  EXPECT_THROW(rope_forward(f.data(), v.data(), RopeDims{.b = 1, .h = 1, .t = 1, .d = 3}), Error);
}

TEST(Sinusoidal, FairseqTable) {
  // C = 8: half = 4, freq_k = 10000^(−k/3). Positions: 2 (first token), 1 (pad → zeros), 5.
  const int32_t pos[3] = {2, 1, 5};
  std::vector<float> out(3 * 8, -1.f);
  sinusoidal_forward(out.data(), pos, SinusoidalDims{.n = 3, .c = 8, .padding_idx = 1});
  for (int row : {0, 2}) {
    for (int k = 0; k < 4; ++k) {
      const double arg = pos[row] * std::pow(10000.0, -k / 3.0);
      EXPECT_NEAR(out[row * 8 + k], std::sin(arg), 1e-6) << row << "," << k;
      EXPECT_NEAR(out[row * 8 + 4 + k], std::cos(arg), 1e-6) << row << "," << k;
    }
  }
  for (int c = 0; c < 8; ++c) EXPECT_EQ(out[8 + c], 0.f) << "pad row";
  // Odd C: a zero last column, as fairseq.
  std::vector<float> odd(2 * 9, -1.f);
  sinusoidal_forward(odd.data(), pos, SinusoidalDims{.n = 2, .c = 9});
  EXPECT_EQ(odd[8], 0.f);
  EXPECT_NEAR(odd[0], std::sin(2.0), 1e-6);
  EXPECT_THROW(sinusoidal_forward(odd.data(), pos, SinusoidalDims{.n = 1, .c = 3}), Error);
  // make_positions: pads keep padding_idx, the others count from padding_idx + 1 per row.
  const int32_t tokens[8] = {5, 1, 7, 9, 1, 1, 4, 1};
  int32_t p[8];
  make_positions(p, tokens, 2, 4, 1);
  const int32_t want[8] = {2, 1, 3, 4, 1, 1, 2, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p[i], want[i]) << i;
}

TEST(BadInput, EmbeddingIdOutOfRangeNamesTheOffset) {
  const int32_t ids[4] = {0, 2, 1, 7};
  const float table[3 * 2] = {};
  float out[4 * 2];
  try {
    embedding_forward(out, ids, table, 1.f, EmbeddingDims{.n = 4, .v = 3, .c = 2});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_NE(std::string(e.what()).find("token id 7 at offset 3"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
  float dtable[6] = {};
  EXPECT_THROW(embedding_backward(dtable, out, ids, 1.f, EmbeddingDims{.n = 4, .v = 3, .c = 2}), Error);
}

TEST(BadInput, CrossEntropyTargetOutOfRangeNamesTheOffset) {
  const float logits[4] = {};
  const int32_t targets[2] = {1, -3};  // 1 is the ignore index (fine); −3 is not
  try {
    cross_entropy_forward(nullptr, nullptr, logits, targets, CrossEntropyDims{.n = 2, .v = 2, .ignore_index = 1});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target -3 at offset 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stretch::ops
