// tests/autograd/test_band_functions.cpp — the autograd functions the adaptive input and softmax
// are built from, against the same formula built from other ops, values and every gradient:
//   linear_transposed(x, w [I, O])     vs linear(x, wᵀ materialised)
//   gather_rows(x, rows)               vs embedding(rows, x) (the same row lookup)
//   scatter_rows(parts)                its values placed row by row, its gradients = gather_rows of
//                                      the output's gradient (the adjoint)
//   concat_rows(a, b)                  the values copied and the gradient split (bitwise)
//   slice_rows(x, start, n)            rows of a [N, C] weight and of a [V] bias: the values copied,
//                                      the gradient added into exactly those rows (bitwise), twice
//                                      for overlapping slices, zero elsewhere
//   concat_time(memory, x), last_time  (transformer_lm --mem-len) the values copied per batch row;
//                                      x's gradient = the output gradient's rows (bitwise), zero
//                                      for rows last_time drops; none into the memory
// Tolerance: max|a − b| / max|b| ≤ 1e-6 (different summation orders of one GEMM; a wrong
// transpose, row or missing gradient term is O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/tape.h"
#include "core/rng.h"

namespace stretch::autograd {
namespace {

Var random_var(Shape s, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(s));
  Rng rng(seed, 5);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.uniform(-1.f, 1.f);
  return Var(t, true);
}
Var copy_of(const Var& v) { return Var(v.value().clone(), true); }

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

// A scalar whose gradient differs in every element of y [n, K]: summed cross-entropy against
// fixed random targets (softmax − onehot).
Var scalar_of(const Var& y, uint64_t seed) {
  const int64_t K = y.shape()[-1], n = y.numel() / K;
  Tensor t = Tensor::empty({n}, DType::I32);
  Rng rng(seed, 6);
  for (int64_t i = 0; i < n; ++i) t.i32()[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(K)));
  return cross_entropy(y, t, -1, ops::Reduction::Sum);
}

Tensor transposed(const Tensor& w) {  // [I, O] -> [O, I]
  const int64_t I = w.dim(0), O = w.dim(1);
  Tensor t = Tensor::empty({O, I});
  for (int64_t i = 0; i < I; ++i)
    for (int64_t o = 0; o < O; ++o) t.f32()[o * I + i] = w.f32()[i * O + o];
  return t;
}

Tensor rows_of(std::vector<int64_t> r) {
  Tensor t = Tensor::empty({static_cast<int64_t>(r.size())}, DType::I64);
  std::copy(r.begin(), r.end(), t.i64());
  return t;
}

TEST(BandFunctions, LinearTransposedEqualsLinearOfTheTranspose) {
  Var x = random_var({2, 5, 7}, 1), w = random_var({7, 3}, 2);  // x [B, T, I], w [I, O]
  Var x2 = copy_of(x), wt(transposed(w.value()), true);
  Var y = linear_transposed(x, w);  // each path recorded and replayed alone (backward clears the tape)
  ASSERT_EQ(y.shape(), Shape({2, 5, 3}));
  tape().backward(scalar_of(y, 3));
  Var y2 = linear(x2, wt, Var());
  expect_close(y.value(), y2.value(), "y");
  tape().backward(scalar_of(y2, 3));
  expect_close(x.grad(), x2.grad(), "dx");
  expect_close(w.grad(), transposed(wt.grad()), "dw");
}

TEST(BandFunctions, GatherRowsEqualsAnEmbeddingLookup) {
  Var x = random_var({6, 4}, 4), x2 = copy_of(x);
  const Tensor rows = rows_of({5, 0, 5, 2});  // a repeated row and unused rows
  Tensor ids = Tensor::empty({4}, DType::I32);
  for (int i = 0; i < 4; ++i) ids.i32()[i] = static_cast<int32_t>(rows.i64()[i]);
  Var y = gather_rows(x, rows);
  tape().backward(scalar_of(y, 5));
  Var y2 = embedding(ids, x2);
  expect_close(y.value(), y2.value(), "y");
  tape().backward(scalar_of(y2, 5));
  expect_close(x.grad(), x2.grad(), "dx");
}

// Parts a (rows 3, 0) and b (rows 1, 4, 2) into [5, C]: each output row is its part's row, and
// each part's gradient is the output gradient's rows (the loss's gradient taken on a copy).
TEST(BandFunctions, ScatterRowsIsTheAdjointOfGather) {
  Var a = random_var({2, 3}, 6), b = random_var({3, 3}, 7);
  const Tensor ra = rows_of({3, 0}), rb = rows_of({1, 4, 2});
  Var y = scatter_rows({{a, ra}, {b, rb}}, Shape({5, 3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y.value().f32()[ra.i64()[i] * 3 + c], a.value().f32()[i * 3 + c]);
  for (int64_t i = 0; i < 3; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y.value().f32()[rb.i64()[i] * 3 + c], b.value().f32()[i * 3 + c]);
  Var y_probe(y.value().clone(), true);
  tape().backward(scalar_of(y, 8));
  tape().backward(scalar_of(y_probe, 8));  // d loss / d y, the same loss on the same values
  Var ga = gather_rows(Var(y_probe.grad()), ra), gb = gather_rows(Var(y_probe.grad()), rb);
  expect_close(a.grad(), ga.value(), "da");
  expect_close(b.grad(), gb.value(), "db");
}

TEST(BandFunctions, ConcatRowsCopiesAndSplitsTheGradient) {
  Var a = random_var({4, 3}, 9), b = random_var({2, 3}, 10);
  Var y = concat_rows(a, b);
  ASSERT_EQ(y.shape(), Shape({6, 3}));
  Var y_probe(y.value().clone(), true);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(y.value().f32()[i], a.value().f32()[i]);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.value().f32()[12 + i], b.value().f32()[i]);
  tape().backward(scalar_of(y, 11));
  tape().backward(scalar_of(y_probe, 11));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(a.grad().f32()[i], y_probe.grad().f32()[i]);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.grad().f32()[i], y_probe.grad().f32()[12 + i]);
}

TEST(BandFunctions, SliceRowsCopiesAndAddsTheGradientIntoItsRows) {
  for (const Shape& shape : {Shape({7, 3}), Shape({7})}) {
    const int64_t row = shape.rank() == 2 ? 3 : 1;
    Var x = random_var(shape, 21);
    Var a = slice_rows(x, 1, 4), b = slice_rows(x, 3, 2);  // rows 3 and 4 in both
    ASSERT_EQ(a.shape()[0], 4);
    ASSERT_EQ(b.shape()[0], 2);
    for (int64_t i = 0; i < 4 * row; ++i) EXPECT_EQ(a.value().f32()[i], x.value().f32()[row + i]);
    Var a_probe(a.value().clone(), true), b_probe(b.value().clone(), true);
    tape().backward(add(scalar_of(a, 22), scalar_of(b, 23)));
    tape().backward(add(scalar_of(a_probe, 22), scalar_of(b_probe, 23)));
    for (int64_t r = 0; r < 7; ++r)
      for (int64_t c = 0; c < row; ++c) {
        float want = 0.f;
        if (r >= 1 && r < 5) want += a_probe.grad().f32()[(r - 1) * row + c];
        if (r >= 3 && r < 5) want += b_probe.grad().f32()[(r - 3) * row + c];
        EXPECT_EQ(x.grad().f32()[r * row + c], want) << "row " << r;
      }
  }
}

TEST(BandFunctions, ConcatTimeAndLastTimeCopyAndRouteTheGradient) {
  const int64_t B = 2, S = 3, T = 4, C = 5;
  const Tensor memory = random_var({B, S, C}, 12).value();  // a constant: no gradient
  Var x = random_var({B, T, C}, 13);
  Var y = concat_time(memory, x);  // [B, S + T, C]
  ASSERT_EQ(y.shape(), Shape({B, S + T, C}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S + T; ++t)
      for (int64_t c = 0; c < C; ++c)
        EXPECT_EQ(y.value().f32()[(b * (S + T) + t) * C + c],
                  t < S ? memory.f32()[(b * S + t) * C + c] : x.value().f32()[(b * T + t - S) * C + c]);
  Var z = last_time(y, 2);  // [B, 2, C]: x's last two positions
  ASSERT_EQ(z.shape(), Shape({B, 2, C}));
  Var z_probe(z.value().clone(), true);
  tape().backward(scalar_of(z, 14));
  tape().backward(scalar_of(z_probe, 14));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const float want = t < T - 2 ? 0.f : z_probe.grad().f32()[(b * 2 + t - (T - 2)) * C + c];
        EXPECT_EQ(x.grad().f32()[(b * T + t) * C + c], want) << b << " " << t << " " << c;
      }
  EXPECT_NE(z_probe.grad().f32()[0], 0.f);
  // last_time of the whole length is the identity (no copy, no tape entry).
  Var w = random_var({B, T, C}, 15);
  EXPECT_EQ(last_time(w, T).data(), w.data());
}

}  // namespace
}  // namespace stretch::autograd
