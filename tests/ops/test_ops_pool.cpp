// tests/ops/test_ops_pool.cpp — a training-step-like sequence of op calls on Tensors makes no
// system allocation after its first round (tensor/pool.h contract; ops take scratch from the pool).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/activation.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rope.h"
#include "ops/sinusoidal.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"

namespace stretch::ops {
namespace {

// One forward + backward of a tiny pre-norm block with every foundation op, all buffers Tensors
// that die at the end of the round.
void one_round(int step) {
  const int64_t B = 2, T = 8, C = 24, H = 3, D = 8, F = 40, V = 50, N = B * T;
  Tensor ids = Tensor::empty({B, T}, DType::I32), targets = Tensor::empty({B, T}, DType::I32);
  for (int64_t i = 0; i < N; ++i) {
    ids.i32()[i] = static_cast<int32_t>((i * 7 + step) % V);
    targets.i32()[i] = static_cast<int32_t>((i * 3 + 1) % V);
  }
  Tensor table = Tensor::full({V, C}, 0.01f), pos = Tensor::empty({B, T}, DType::I32);
  Tensor ln_w = Tensor::full({C}, 1.f), ln_b = Tensor::zeros({C});
  Tensor w1 = Tensor::full({F, C}, 0.02f), b1 = Tensor::zeros({F}), w2 = Tensor::full({C, F}, 0.02f);
  Tensor wq = Tensor::full({C, C}, 0.03f), wo = Tensor::full({V, C}, 0.01f);

  Tensor x = Tensor::empty({B, T, C}), pe = Tensor::empty({B, T, C});
  embedding_forward(x.f32(), ids.i32(), table.f32(), 4.f, EmbeddingDims{.n = N, .v = V, .c = C});
  make_positions(pos.i32(), ids.i32(), B, T, 1);
  sinusoidal_forward(pe.f32(), pos.i32(), SinusoidalDims{.n = N, .c = C});
  add_forward(x.f32(), x.f32(), pe.f32(), N * C);
  Tensor h = Tensor::empty({B, T, C}), mean = Tensor::empty({B, T}), rstd = Tensor::empty({B, T});
  layernorm_forward(h.f32(), mean.f32(), rstd.f32(), x.f32(), ln_w.f32(), ln_b.f32(), LayerNormDims{.n = N, .c = C});
  Tensor q = Tensor::empty({B, T, C}), qh = Tensor::empty({B, H, T, D}), back = Tensor::empty({B, T, C});
  linear_forward(q.f32(), h.f32(), wq.f32(), nullptr, LinearDims{.n = N, .in_features = C, .out_features = C});
  split_heads(qh.f32(), q.f32(), HeadDims{.b = B, .t = T, .h = H, .d = D});
  rope_forward(qh.f32(), qh.f32(), RopeDims{.b = B, .h = H, .t = T, .d = D});
  merge_heads(back.f32(), qh.f32(), HeadDims{.b = B, .t = T, .h = H, .d = D});
  Tensor u = Tensor::empty({B, T, F}), a = Tensor::empty({B, T, F}), y = Tensor::empty({B, T, C});
  const LinearDims l1{.n = N, .in_features = C, .out_features = F}, l2{.n = N, .in_features = F, .out_features = C};
  linear_forward(u.f32(), back.f32(), w1.f32(), b1.f32(), l1);
  activation_forward(a.f32(), u.f32(), N * F, Activation::Gelu);
  const DropoutParams dp{.p = 0.1f, .seed = 1, .stream = static_cast<uint64_t>(step)};
  dropout_forward(a.f32(), a.f32(), N * F, dp);
  linear_forward(y.f32(), a.f32(), w2.f32(), nullptr, l2);
  axpy(y.f32(), x.f32(), 1.f, N * C);
  Tensor logits = Tensor::empty({B, T, V}), lse = Tensor::empty({B, T});
  const LinearDims lo{.n = N, .in_features = C, .out_features = V};
  linear_forward(logits.f32(), y.f32(), wo.f32(), nullptr, lo);
  const CrossEntropyDims cd{.n = N, .v = V, .ignore_index = 1, .reduction = Reduction::Mean};
  const CrossEntropyResult r = cross_entropy_forward(nullptr, lse.f32(), logits.f32(), targets.i32(), cd);

  Tensor dlogits = Tensor::zeros({B, T, V}), dy = Tensor::zeros({B, T, C}), dwo = Tensor::zeros({V, C});
  cross_entropy_backward(dlogits.f32(), logits.f32(), lse.f32(), targets.i32(), 1.f, r.count, cd);
  linear_backward(dy.f32(), dwo.f32(), nullptr, dlogits.f32(), y.f32(), wo.f32(), lo);
  Tensor da = Tensor::zeros({B, T, F}), du = Tensor::zeros({B, T, F}), dw2 = Tensor::zeros({C, F});
  linear_backward(da.f32(), dw2.f32(), nullptr, dy.f32(), a.f32(), w2.f32(), l2);
  Tensor da2 = Tensor::zeros({B, T, F});
  dropout_backward(da2.f32(), da.f32(), N * F, dp);
  activation_backward(du.f32(), da2.f32(), u.f32(), N * F, Activation::Gelu);
  Tensor dback = Tensor::zeros({B, T, C}), dw1 = Tensor::zeros({F, C}), db1 = Tensor::zeros({F});
  linear_backward(dback.f32(), dw1.f32(), db1.f32(), du.f32(), back.f32(), w1.f32(), l1);
  Tensor dqh = Tensor::empty({B, H, T, D}), dqh2 = Tensor::zeros({B, H, T, D}), dq = Tensor::empty({B, T, C});
  split_heads(dqh.f32(), dback.f32(), HeadDims{.b = B, .t = T, .h = H, .d = D});
  rope_backward(dqh2.f32(), dqh.f32(), RopeDims{.b = B, .h = H, .t = T, .d = D});
  merge_heads(dq.f32(), dqh2.f32(), HeadDims{.b = B, .t = T, .h = H, .d = D});
  Tensor dh = Tensor::zeros({B, T, C}), dwq = Tensor::zeros({C, C});
  linear_backward(dh.f32(), dwq.f32(), nullptr, dq.f32(), h.f32(), wq.f32(),
                  LinearDims{.n = N, .in_features = C, .out_features = C});
  Tensor dx = dy.clone(), dlw = Tensor::zeros({C}), dlb = Tensor::zeros({C}), dtable = Tensor::zeros({V, C});
  layernorm_backward(dx.f32(), dlw.f32(), dlb.f32(), dh.f32(), x.f32(), ln_w.f32(), mean.f32(), rstd.f32(),
                     LayerNormDims{.n = N, .c = C});
  embedding_backward(dtable.f32(), dx.f32(), ids.i32(), 4.f, EmbeddingDims{.n = N, .v = V, .c = C});
  scale_forward(dtable.f32(), dtable.f32(), 0.5f, V * C);
  ASSERT_TRUE(std::isfinite(r.loss));
}

TEST(OpsPool, RepeatedRoundsMakeNoSystemAllocation) {
  one_round(0);
  const PoolStats first = pool_stats();
  for (int step = 1; step < 4; ++step) one_round(step);
  const PoolStats later = pool_stats();
  EXPECT_EQ(later.system_allocs, first.system_allocs) << "ops or tensors allocated from the system after round 1";
  EXPECT_GT(later.reuses, first.reuses + 3 * 40) << "the rounds did not go through the pool";
}

}  // namespace
}  // namespace stretch::ops
