// tests/autograd/test_fused_functions.cpp — the fused autograd functions against the same formula
// built from small ops (DESIGN.md §5.4), values and every gradient, and the gradient-buffer
// shortcuts (overwrite instead of zero-fill, adopting a buffer instead of copying) against the
// plain accumulate path forced by pre-allocated gradients.
//   dropout_add(res, x)            vs add(res, dropout(x))
//   linear(x, w, b, Relu)          vs activation(linear(x, w, b), Relu)
//   cross_entropy(ReuseForGradient) vs cross_entropy(Keep)
//   linear_rows(x, w, first, count) vs linear(x, a copy of those rows of w)
// Tolerances: the fused and composed forms do the same float operations in the same order, except
// that a fused pass may contract a·b + c into one FMA (one rounding instead of two: ≤ 1 ulp per
// element); those differences reach the gradients through the loss. Compared as
// max|a − b| / max|b| ≤ 1e-6 (observed ≲ 1e-7; a wrong mask or a lost gradient term is O(1)).
// Where nothing is contracted (ReLU) the comparison is bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "autograd/functions.h"
#include "bf16_support.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "tensor/pool.h"

namespace stretch::autograd {
namespace {

Var random_var(Shape s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(std::move(s));
  Rng rng(seed, 5);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.uniform(lo, hi);
  return Var(t, true);
}

Var copy_of(const Var& v) { return Var(v.value().clone(), true); }

Tensor targets(int64_t n, int32_t vocab, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::I32);
  Rng rng(seed, 6);
  for (int64_t i = 0; i < n; ++i) t.i32()[i] = static_cast<int32_t>(rng.below(vocab));
  if (n > 2) t.i32()[1] = 1;  // one ignored row (ignore_index 1)
  return t;
}

void expect_same(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.f32()[i], b.f32()[i]) << what << " [" << i << "]";
}

void expect_close(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.f32()[i]) - b.f32()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.f32()[i])));
  }
  EXPECT_LE(diff, 1e-6 * scale) << what;
  EXPECT_GT(scale, 0.0) << what << ": an all-zero tensor proves nothing";
}

// A scalar loss on top of y [N, C]: cross-entropy of y·Wᵀ (W [V, C]) against fixed targets.
Var head_loss(const Var& y, const Var& w, const Tensor& tgt) {
  return cross_entropy(linear(y, w, Var()), tgt, 1, ops::Reduction::Sum);
}

// The pre-norm residual pattern: x feeds both a layer norm (the branch) and the residual.
struct Block {
  Var x, ln_w, ln_b, fc_w, fc_b, head_w;
};
Block make_block(uint64_t seed) {
  const int64_t N = 37, C = 24, V = 11;
  return {random_var({N, C}, seed), random_var({C}, seed + 1, 0.5f, 1.5f), random_var({C}, seed + 2),
          random_var({C, C}, seed + 3), random_var({C}, seed + 4), random_var({V, C}, seed + 5)};
}
Block clone_block(const Block& b) {
  return {copy_of(b.x), copy_of(b.ln_w), copy_of(b.ln_b), copy_of(b.fc_w), copy_of(b.fc_b), copy_of(b.head_w)};
}

TEST(FusedFunctions, DropoutAddMatchesComposedAndAccumulatePath) {
  const ops::DropoutParams p{.p = 0.3f, .seed = 4, .stream = 9};
  const Block a = make_block(10), b = clone_block(a), c = clone_block(a);
  const Tensor tgt = targets(37, 11, 3);
  auto run = [&](const Block& k, bool fused) {
    Var h = linear(layer_norm(k.x, k.ln_w, k.ln_b), k.fc_w, k.fc_b);
    Var y = fused ? dropout_add(k.x, h, p) : add(k.x, dropout(h, p));
    Var loss = head_loss(y, k.head_w, tgt);
    tape().backward(loss);
    return y;
  };
  // c: every gradient pre-allocated (zeros), so no shortcut applies: the plain += path.
  for (const Var* v : {&c.x, &c.ln_w, &c.ln_b, &c.fc_w, &c.fc_b, &c.head_w}) v->grad();
  const Var ya = run(a, true), yb = run(b, false), yc = run(c, true);
  expect_close(ya.value(), yb.value(), "y fused vs composed");
  expect_same(ya.value(), yc.value(), "y: same fused forward");
  for (const Block* o : {&b, &c}) {
    expect_close(a.x.grad(), o->x.grad(), "dx");
    expect_close(a.ln_w.grad(), o->ln_w.grad(), "dln_w");
    expect_close(a.ln_b.grad(), o->ln_b.grad(), "dln_b");
    expect_close(a.fc_w.grad(), o->fc_w.grad(), "dfc_w");
    expect_close(a.fc_b.grad(), o->fc_b.grad(), "dfc_b");
    expect_close(a.head_w.grad(), o->head_w.grad(), "dhead_w");
  }
}

TEST(FusedFunctions, LinearReluMatchesLinearThenActivation) {
  const Block a = make_block(20), b = clone_block(a);
  const Tensor tgt = targets(37, 11, 4);
  auto run = [&](const Block& k, bool fused) {
    Var h = fused ? linear(k.x, k.fc_w, k.fc_b, ops::LinearEpilogue::Relu)
                  : activation(linear(k.x, k.fc_w, k.fc_b), ops::Activation::Relu);
    Var loss = head_loss(h, k.head_w, tgt);
    tape().backward(loss);
    return h;
  };
  const Var ha = run(a, true), hb = run(b, false);
  expect_same(ha.value(), hb.value(), "relu(linear)");
  int64_t zeros = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) zeros += ha.value().f32()[i] == 0.f;
  EXPECT_GT(zeros, ha.numel() / 4) << "the case must exercise the ReLU's zero side";
  expect_same(a.x.grad(), b.x.grad(), "dx");
  expect_same(a.fc_w.grad(), b.fc_w.grad(), "dw");
  expect_same(a.fc_b.grad(), b.fc_b.grad(), "db");
}

TEST(FusedFunctions, CrossEntropyInPlaceGradientMatchesKeep) {
  const int64_t N = 29, C = 16, V = 300;
  const Var x = random_var({N, C}, 30), w = random_var({V, C}, 31, -2.f, 2.f);
  const Var x2 = copy_of(x), w2 = copy_of(w);
  const Tensor tgt = targets(N, static_cast<int32_t>(V), 5);
  Var logits = linear(x, w, Var());
  Var loss = cross_entropy(logits, tgt, 1, ops::Reduction::Sum, nullptr, LogitsBuffer::ReuseForGradient);
  tape().backward(loss);
  Var logits2 = linear(x2, w2, Var());
  Var loss2 = cross_entropy(logits2, tgt, 1, ops::Reduction::Sum);
  tape().backward(loss2);
  // exp(x − max)/Σ instead of exp(x − lse): a few ulp per probability (compared as expect_close).
  EXPECT_NEAR(loss.value().f32()[0], loss2.value().f32()[0], 1e-6 * std::abs(loss2.value().f32()[0]));
  expect_close(x.grad(), x2.grad(), "dx");
  expect_close(w.grad(), w2.grad(), "dw");
  // The in-place path wrote the gradient over the logits: softmax − onehot rows sum to 0 (the
  // ignored row 1 is exactly 0), while the Keep path left its logits alone.
  for (int64_t n = 0; n < N; ++n) {
    double sum = 0, mag = 0;
    for (int64_t v = 0; v < V; ++v) {
      sum += logits.value().f32()[n * V + v];
      mag = std::max(mag, std::abs(static_cast<double>(logits.value().f32()[n * V + v])));
    }
    EXPECT_NEAR(sum, 0.0, 1e-5) << "row " << n;
    if (n == 1) EXPECT_EQ(mag, 0.0);
    else EXPECT_GT(mag, 0.0);
  }
  NoGradGuard no_grad;
  Var logits3 = linear(x2, w2, Var());
  expect_same(logits2.value(), logits3.value(), "Keep leaves the logits");
}

// Restores fp32 products, native bf16 products and an empty tape when a bf16 test ends.
struct PrecisionGuard {
  PrecisionGuard() = default;
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
  ~PrecisionGuard() {
    ops::set_matmul_precision(ops::GemmPrecision::Fp32);
    ops::set_bf16_products(ops::Bf16Products::Native);
    tape().clear();
  }
};

// bf16 training: autograd's linear rounds its input and weight once for the three GEMMs and
// backward rounds dout once for two. The result must be bitwise the ops-level linear that rounds
// every operand per GEMM (same rounding of the same values), for y, dx, dW and db, with and
// without the ReLU epilogue — with bf16 products run natively (packed bf16 copies) and as fp32
// FMAs on the bf16 values (Bf16Products::Fp32Fma: fp32 copies of the values; on every CPU).
void expect_bf16_linear_rounds_once() {
  const int64_t N = 29, I = 40, O = 23;
  for (auto epi : {ops::LinearEpilogue::None, ops::LinearEpilogue::Relu}) {
    Var x = random_var({N, I}, 71), w = random_var({O, I}, 72), b = random_var({O}, 73);
    Var dy_src = random_var({N, O}, 74);
    Var y = linear(x, w, b, epi);
    // Seed dL/dy = g directly, then replay the tape (backward's own scalar is a dummy here).
    std::copy_n(dy_src.value().f32(), N * O, y.grad().f32());
    tape().backward(Var(Tensor::full({1}, 0.f), true));
    std::vector<float> y2(N * O), dx2(N * I, 0.f), dw2(O * I, 0.f), db2(O, 0.f), g(dy_src.value().f32(),
                                                                                       dy_src.value().f32() + N * O);
    const ops::LinearDims d{.n = N, .in_features = I, .out_features = O};
    ops::linear_forward(y2.data(), x.data(), w.data(), b.data(), d, epi);
    if (epi == ops::LinearEpilogue::Relu)
      for (int64_t i = 0; i < N * O; ++i) g[i] = y2[i] > 0.f ? g[i] : 0.f;
    ops::linear_backward(dx2.data(), dw2.data(), db2.data(), g.data(), x.data(), w.data(), d);
    for (int64_t i = 0; i < N * O; ++i) ASSERT_EQ(y.value().f32()[i], y2[i]) << "y " << i;
    for (int64_t i = 0; i < N * I; ++i) ASSERT_EQ(x.grad().f32()[i], dx2[i]) << "dx " << i;
    for (int64_t i = 0; i < O * I; ++i) ASSERT_EQ(w.grad().f32()[i], dw2[i]) << "dw " << i;
    for (int64_t i = 0; i < O; ++i) ASSERT_EQ(b.grad().f32()[i], db2[i]) << "db " << i;
  }
}

TEST(FusedFunctions, Bf16LinearRoundsOnceWithTheSameResult) {
  const PrecisionGuard guard;
  ops::set_matmul_precision(ops::GemmPrecision::Bf16);
  {
    SCOPED_TRACE("fp32 FMAs on bf16 values");
    ops::set_bf16_products(ops::Bf16Products::Fp32Fma);
    expect_bf16_linear_rounds_once();
    ops::set_bf16_products(ops::Bf16Products::Native);
  }
  if (!ops::bf16_matmul_supported()) {  // autograd's linear must surface the refusal, not crash
    Var x = random_var({29, 40}, 71), w = random_var({23, 40}, 72), b = random_var({23}, 73);
    testing::expect_bf16_refused([&] { linear(x, w, b, ops::LinearEpilogue::None); });
    if (HasFailure()) return;
    GTEST_SKIP() << testing::bf16_skip_message() << " (the Fp32Fma half passed)";
  }
  SCOPED_TRACE("native bf16");
  expect_bf16_linear_rounds_once();
}

// Memory: what autograd's linear keeps from its forward for backward (the tape's captures), as
// the pool's bytes in use after the forward. fp32 keeps only y; under Fp32Fma the fp32 copies of
// x's and w's bf16 values are made again in backward, so it keeps what fp32 keeps (kept, they were
// 4·(N·I + O·I) bytes more: `--bf16` trained in 1.4-1.6x fp32's memory); native bf16 keeps the packed
// copy of w, 2·O·I bytes more, and none of x, which each GEMM rounds for itself (kept, it was 2·N·I
// more: native `--bf16` trained in up to 1.16x fp32's memory). Then the backward of each: the same gradients as
// when the copies were kept (Bf16LinearRoundsOnceWithTheSameResult checks the values).
TEST(FusedFunctions, Fp32FmaLinearKeepsNoCopiesForBackward) {
  const PrecisionGuard guard;
  const int64_t N = 512, I = 256, O = 128;  // sizes whose buffers no smaller pool class serves
  auto kept_bytes = [&](ops::GemmPrecision precision, ops::Bf16Products products) {
    ops::set_matmul_precision(precision);
    ops::set_bf16_products(products);
    Var x = random_var({N, I}, 81), w = random_var({O, I}, 82), b = random_var({O}, 83);
    tape().clear();
    const uint64_t before = pool_stats().bytes_in_use;
    Var y = linear(x, w, b);
    const uint64_t kept = pool_stats().bytes_in_use - before;
    std::fill_n(y.grad().f32(), N * O, 1.f);
    tape().backward(Var(Tensor::full({1}, 0.f), true));
    EXPECT_GT(std::fabs(w.grad().f32()[0]), 0.f);
    tape().clear();
    return kept;
  };
  const uint64_t fp32 = kept_bytes(ops::GemmPrecision::Fp32, ops::Bf16Products::Native);
  EXPECT_GE(fp32, uint64_t{N * O * 4}) << "y itself";
  EXPECT_EQ(kept_bytes(ops::GemmPrecision::Bf16, ops::Bf16Products::Fp32Fma), fp32);
  if (ops::bf16_matmul_supported()) {
    EXPECT_EQ(kept_bytes(ops::GemmPrecision::Bf16, ops::Bf16Products::Native), fp32 + 2 * O * I)
        << "the native path keeps the weight's packed copy (the check sees what is kept), not the input's";
  }
}

// Memory of the backward: the output gradient dy [N, O] is rounded in its own buffer under bf16,
// not into a copy (for the vocabulary layer an [N, V] one, the peak of a `--bf16` step). The pool's
// peak during backward, above what was in use before it, is fp32's (the gradients dx, dw, db), plus
// at most x rounded by dweight's GEMM under native bf16, and fp32's plus the fp32 copies of x's and w's values under
// Fp32Fma (made again in backward: FusedFunctions.Fp32FmaLinearKeepsNoCopiesForBackward). A copy of dy
// would add 2·N·O bytes (packed bf16) or 4·N·O (values), more than either.
TEST(FusedFunctions, Bf16LinearBackwardRoundsDoutInItsOwnBuffer) {
  const PrecisionGuard guard;
  const int64_t N = 512, I = 64, O = 1024;
  auto backward_bytes = [&](ops::GemmPrecision precision, ops::Bf16Products products) {
    ops::set_matmul_precision(precision);
    ops::set_bf16_products(products);
    Var x = random_var({N, I}, 91), w = random_var({O, I}, 92), b = random_var({O}, 93);
    tape().clear();
    Var y = linear(x, w, b);
    const float g = 0.5f + 1.f / 4096;  // not a bf16 number (it rounds to 0.5); sums exactly
    std::fill_n(y.grad().f32(), N * O, g);
    const uint64_t before = pool_stats().bytes_in_use;
    pool_reset_peak();
    tape().backward(Var(Tensor::full({1}, 0.f), true));
    const uint64_t extra = pool_stats().peak_bytes_in_use - before;
    EXPECT_EQ(w.grad().f32()[0], w.grad().f32()[0]) << "not NaN";
    EXPECT_NE(w.grad().f32()[0], 0.f);
    EXPECT_EQ(b.grad().f32()[0], 256.125f) << "dbias sums dy before it is rounded (N · g)";
    tape().clear();
    return extra;
  };
  const uint64_t fp32 = backward_bytes(ops::GemmPrecision::Fp32, ops::Bf16Products::Native);
  EXPECT_GE(fp32, uint64_t{4 * (N * I + O * I)}) << "dx and dw";
  EXPECT_LT(fp32, uint64_t{4 * (N * I + O * I) + 2 * N * O});
  EXPECT_EQ(backward_bytes(ops::GemmPrecision::Bf16, ops::Bf16Products::Fp32Fma), fp32 + 4 * (N * I + O * I));
  if (ops::bf16_matmul_supported()) {
    EXPECT_LE(backward_bytes(ops::GemmPrecision::Bf16, ops::Bf16Products::Native), fp32 + 2 * N * I)
        << "at most x rounded by dweight's GEMM; a copy of dy would be 2·N·O = 16·(2·N·I) bytes more";
  }
}

// Transformer-XL's q and kv projections: two linear_rows over one weight's rows [0, 4) and [4, 9)
// against linear over separate copies of those rows. The outputs and dx agree, each copy's
// gradient is the weight gradient's rows, and the gradient of rows no call used stays zero.
TEST(FusedFunctions, LinearRowsIsTheLinearOfACopyOfThoseRows) {
  const int64_t N = 37, C = 24, V = 11;
  const Var x = random_var({N, C}, 30), w = random_var({10, C}, 31);  // row 9: used by neither
  const Var h1 = random_var({V, 4}, 32), h2 = random_var({V, 5}, 33);
  const Tensor tgt = targets(N, static_cast<int32_t>(V), 5);
  const Var ya = linear_rows(x, w, 0, 4), yb = linear_rows(x, w, 4, 5);
  tape().backward(add(head_loss(ya, h1, tgt), head_loss(yb, h2, tgt)));

  const Var x2 = copy_of(x);
  Tensor wa = Tensor::empty({4, C}), wb = Tensor::empty({5, C});
  std::copy_n(w.data(), 4 * C, wa.f32());
  std::copy_n(w.data() + 4 * C, 5 * C, wb.f32());
  const Var w_a(wa, true), w_b(wb, true), h1b = copy_of(h1), h2b = copy_of(h2);
  const Var ra = linear(x2, w_a, Var()), rb = linear(x2, w_b, Var());
  tape().backward(add(head_loss(ra, h1b, tgt), head_loss(rb, h2b, tgt)));

  expect_close(ya.value(), ra.value(), "y rows 0..3");
  expect_close(yb.value(), rb.value(), "y rows 4..8");
  expect_close(x.grad(), x2.grad(), "dx");
  Tensor ga = Tensor::empty({4, C}), gb = Tensor::empty({5, C});
  std::copy_n(w.grad().f32(), 4 * C, ga.f32());
  std::copy_n(w.grad().f32() + 4 * C, 5 * C, gb.f32());
  expect_close(ga, w_a.grad(), "dw rows 0..3");
  expect_close(gb, w_b.grad(), "dw rows 4..8");
  for (int64_t i = 9 * C; i < 10 * C; ++i) ASSERT_EQ(w.grad().f32()[i], 0.f) << "row 9 has no gradient";
  EXPECT_THROW(linear_rows(x, w, 6, 5), std::exception) << "rows past the weight are refused";
}

// ALiBi's fused projection with memory (nn::SelfAttention): linear_rows with a bias over rows
// [3, 8) of w and b, x [B, R, C] whose first 4 rows per batch are a detached memory, against linear
// over copies of those rows. y, dw and db agree; x's gradient agrees in the segment rows and is 0
// in the memory rows (a fresh buffer), or keeps what an earlier use wrote there (accumulating).
TEST(FusedFunctions, LinearRowsSkipsTheInputGradientOfDetachedRows) {
  const int64_t B = 2, R = 9, M = 4, C = 12, V = 7, first = 3, count = 5;
  const Var x = random_var({B, R, C}, 50), w = random_var({10, C}, 51), b = random_var({10}, 52);
  const Var h = random_var({V, count}, 53);
  const Tensor tgt = targets(B * R, static_cast<int32_t>(V), 6);
  const Var y = linear_rows(x, w, first, count, b, M);
  tape().backward(head_loss(y, h, tgt));

  const Var x2 = copy_of(x), h2 = copy_of(h);
  Tensor wc = Tensor::empty({count, C}), bc = Tensor::empty({count});
  std::copy_n(w.data() + first * C, count * C, wc.f32());
  std::copy_n(b.data() + first, count, bc.f32());
  const Var w2(wc, true), b2(bc, true);
  const Var y2 = linear(x2, w2, b2);
  tape().backward(head_loss(y2, h2, tgt));

  expect_close(y.value(), y2.value(), "y");
  Tensor gw = Tensor::empty({count, C}), gb = Tensor::empty({count});
  std::copy_n(w.grad().f32() + first * C, count * C, gw.f32());
  std::copy_n(b.grad().f32() + first, count, gb.f32());
  expect_close(gw, w2.grad(), "dw rows 3..7");
  expect_close(gb, b2.grad(), "db rows 3..7");
  for (int64_t i = 0; i < first * C; ++i) ASSERT_EQ(w.grad().f32()[i], 0.f) << "w rows 0..2 have no gradient";
  for (int64_t i = 0; i < 10; ++i) {
    if (i < first || i >= first + count) {
      ASSERT_EQ(b.grad().f32()[i], 0.f) << "b[" << i << "] has no gradient";
    }
  }
  double scale = 0;
  for (int64_t r = 0; r < B * R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float got = x.grad().f32()[r * C + c], want = x2.grad().f32()[r * C + c];
      scale = std::max(scale, std::abs(static_cast<double>(want)));
      if (r % R < M)
        ASSERT_EQ(got, 0.f) << "memory row " << r << " got an input gradient";
      else
        ASSERT_NEAR(got, want, 1e-6 * (1 + std::abs(want))) << "segment row " << r;
    }
  EXPECT_GT(scale, 0.0);

  // x's gradient already written by another use: the memory rows keep that, the segment rows add.
  const Var x3 = copy_of(x), h3 = copy_of(h), w3 = copy_of(w), b3 = copy_of(b);
  const Var both = add(linear_rows(x3, w3, first, count, b3, M),
                       linear_rows(x3, w3, first, count, b3));
  tape().backward(head_loss(both, h3, tgt));
  const Var x4 = copy_of(x), h4 = copy_of(h), w4 = copy_of(w), b4 = copy_of(b);
  const Var y4 = linear_rows(x4, w4, first, count, b4);
  tape().backward(head_loss(add(y4, y4), h4, tgt));
  for (int64_t r = 0; r < B * R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float got = x3.grad().f32()[r * C + c], full = x4.grad().f32()[r * C + c];
      if (r % R < M)  // only the undetached use's share: half of the doubled use's
        ASSERT_NEAR(got, full / 2, 1e-6 * (1 + std::abs(full))) << "memory row " << r;
      else
        ASSERT_NEAR(got, full, 1e-6 * (1 + std::abs(full))) << "segment row " << r;
    }
  EXPECT_THROW(linear_rows(x, w, first, count, b, R), std::exception) << "every row detached is refused";
}

}  // namespace
}  // namespace stretch::autograd
