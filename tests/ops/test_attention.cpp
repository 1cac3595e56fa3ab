// tests/ops/test_attention.cpp — the fused CPU attention against the naive reference, forward
// and every gradient (q, k, v, slopes, T5 table), over the edge-shape registry below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "core/threads.h"
#include "ops/attention.h"

namespace stretch::ops {
namespace {

using testing::AttnCase;
using testing::gradient_error;
using testing::grad_terms;
using testing::GradTerms;
using testing::Learn;
using testing::Padding;
using testing::Problem;
using testing::scaled_error;

constexpr auto kBidir = AttentionMask::Bidirectional;

// Tolerance (fast fp32 vs the reference computed in double and rounded once), as an error
// relative to the largest magnitude of the tensor: the kernel sums up to S·D products in fp32
// in a different order (online-softmax rescaling, tile-wise partial sums) and uses libmvec's
// expf (≤ 4 ulp). Expected error ~ sqrt(n)·eps_f32 ≈ sqrt(200·64)·6e-8 ≈ 7e-6 at worst; the
// measured maximum over this registry is 7e-7 for q/k/v/out/lse and 1.3e-6 for the parameter
// gradients (which sum over all B·T·S scores). 1e-5 and 2e-5 keep a >= 10× margin over the
// measurement, while a wrong mask, bias, scale or dropout mask gives errors of 1e-2 or more.
// dq, dk and dv are measured by gradient_error (attention_cases.h): relative to the magnitude of
// the terms summed into each element rather than to the result, which is 0 where they cancel
// exactly (win1_none: one visible key per query, so dq = dk = 0 and only rounding remains).
constexpr double kTol = 1e-5;
constexpr double kTolParam = 2e-5;
// dq and dk under gradient_error: the terms they sum are ~10× larger than the result (they
// cancel), so the same strictness is ~10× smaller a number. Measured maximum over this registry
// (AVX2 host): 1.1e-7 (old metric: 6.5e-7, and 4.2e-5 for win1_none); 2e-6 keeps an 18× margin.
// dv's terms barely cancel: kTol (measured 4.2e-7).
constexpr double kTolGrad = 2e-6;

std::vector<AttnCase> cases() {
  using BP = BiasPolicy;
  using AS = AlibiShape;
  std::vector<AttnCase> v;
  auto add = [&](AttnCase c) { v.push_back(c); };
  // Edge shapes: T = 1, S > T, non-power-of-two H, T not a multiple of the 64-row tile.
  add({.name = "t1_s1_none", .b = 1, .h = 1, .t = 1, .s = 1, .d = 8});
  add({.name = "t1_s37_alibi_h3", .b = 2, .h = 3, .t = 1, .s = 37, .d = 16, .bias = BP::Alibi});
  add({.name = "t5_h6_alibi", .b = 1, .h = 6, .t = 5, .s = 5, .d = 16, .bias = BP::Alibi, .learn = Learn::Yes});
  add({.name = "t70_h8_d64_alibi", .b = 1, .h = 8, .t = 70, .s = 70, .d = 64, .bias = BP::Alibi});
  add({.name = "t67_s131_h12_alibi", .b = 1, .h = 12, .t = 67, .s = 131, .d = 32, .bias = BP::Alibi,
       .learn = Learn::Yes});
  add({.name = "t130_h16_d8_alibi", .b = 1, .h = 16, .t = 130, .s = 130, .d = 8, .bias = BP::Alibi,
       .learn = Learn::Yes});
  add({.name = "t129_h1_d128_none", .b = 1, .h = 1, .t = 129, .s = 129, .d = 128});
  add({.name = "d5_none_s_gt_t", .b = 2, .h = 2, .t = 9, .s = 100, .d = 5});
  add({.name = "d24_alibi", .b = 1, .h = 3, .t = 65, .s = 65, .d = 24, .bias = BP::Alibi});
  // Windows (compose with every policy).
  add({.name = "win40_alibi", .b = 1, .h = 3, .t = 150, .s = 150, .d = 16, .bias = BP::Alibi, .window = 40,
       .learn = Learn::Yes});
  add({.name = "win1_none", .b = 1, .h = 2, .t = 20, .s = 20, .d = 8, .window = 1});
  add({.name = "win64_s_gt_t_t5", .b = 1, .h = 2, .t = 70, .s = 200, .d = 16, .bias = BP::T5, .window = 64,
       .learn = Learn::Yes});
  add({.name = "win7_bidir_sym", .b = 1, .h = 3, .t = 40, .s = 90, .d = 16, .mask = kBidir, .bias = BP::AlibiSym,
       .window = 7, .learn = Learn::Yes});
  // Key padding and rows that see no key at all.
  add({.name = "pad_some_none", .b = 2, .h = 2, .t = 70, .s = 80, .d = 16, .padding = Padding::Some});
  add({.name = "all_masked_rows_alibi", .b = 2, .h = 3, .t = 20, .s = 30, .d = 8, .bias = BP::Alibi,
       .padding = Padding::AllMasked, .learn = Learn::Yes});
  add({.name = "all_masked_batch_bidir", .b = 2, .h = 2, .t = 10, .s = 12, .d = 8, .mask = kBidir,
       .bias = BP::AlibiSym, .padding = Padding::Batch0, .learn = Learn::Yes});
  // Bidirectional alibi-sym.
  add({.name = "bidir_sym_h6", .b = 1, .h = 6, .t = 40, .s = 40, .d = 16, .mask = kBidir, .bias = BP::AlibiSym,
       .learn = Learn::Yes});
  add({.name = "bidir_sym_s_gt_t_pad", .b = 2, .h = 2, .t = 33, .s = 77, .d = 16, .mask = kBidir,
       .bias = BP::AlibiSym, .padding = Padding::Some});
  add({.name = "causal_sym", .b = 1, .h = 4, .t = 30, .s = 30, .d = 8, .bias = BP::AlibiSym});
  add({.name = "bidir_none", .b = 1, .h = 2, .t = 65, .s = 65, .d = 16, .mask = kBidir});
  // ALiBi shapes and slope scale (position interpolation).
  add({.name = "alibi_log", .b = 1, .h = 4, .t = 90, .s = 90, .d = 16, .bias = BP::Alibi, .shape = AS::Log,
       .learn = Learn::Yes});
  add({.name = "alibi_clipped", .b = 1, .h = 4, .t = 90, .s = 100, .d = 16, .bias = BP::Alibi,
       .shape = AS::Clipped, .cap = 10.5f, .learn = Learn::Yes});
  add({.name = "alibi_scaled", .b = 1, .h = 8, .t = 80, .s = 80, .d = 16, .bias = BP::Alibi, .slope_scale = 0.25f,
       .learn = Learn::Yes});
  add({.name = "sym_log_bidir", .b = 1, .h = 2, .t = 30, .s = 45, .d = 8, .mask = kBidir, .bias = BP::AlibiSym,
       .shape = AS::Log, .learn = Learn::Yes});
  add({.name = "sym_clipped_scaled_bidir", .b = 2, .h = 3, .t = 70, .s = 70, .d = 8, .mask = kBidir,
       .bias = BP::AlibiSym, .shape = AS::Clipped, .cap = 7.f, .slope_scale = 0.5f, .learn = Learn::Yes});
  add({.name = "alibi_log_scaled_s_gt_t", .b = 2, .h = 5, .t = 67, .s = 131, .d = 16, .bias = BP::Alibi,
       .shape = AS::Log, .slope_scale = 0.25f, .learn = Learn::Yes});
  // T5 bias (causal = unidirectional buckets, bidirectional = bidirectional buckets).
  add({.name = "t5_causal", .b = 1, .h = 4, .t = 150, .s = 150, .d = 16, .bias = BP::T5, .learn = Learn::Yes});
  add({.name = "t5_small_buckets", .b = 2, .h = 3, .t = 40, .s = 50, .d = 8, .bias = BP::T5, .num_buckets = 8,
       .max_distance = 20, .learn = Learn::Yes});
  add({.name = "t5_bidir", .b = 1, .h = 2, .t = 50, .s = 60, .d = 8, .mask = kBidir, .bias = BP::T5,
       .learn = Learn::Yes});
  // Attention dropout: same mask in both implementations.
  add({.name = "dropout_alibi", .b = 2, .h = 3, .t = 70, .s = 70, .d = 16, .bias = BP::Alibi, .dropout = 0.2f,
       .learn = Learn::Yes});
  add({.name = "dropout_bidir_t5", .b = 1, .h = 2, .t = 20, .s = 30, .d = 8, .mask = kBidir, .bias = BP::T5,
       .padding = Padding::Some, .dropout = 0.5f, .learn = Learn::Yes});
  return v;
}

class AttentionCase : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionCase, FastMatchesReference) {
  const Problem pb(GetParam());
  const AttentionParams p = pb.params();
  const AttnCase& c = pb.c;
  const size_t nq = pb.n_q(), nkv = pb.n_kv(), nr = pb.n_rows();

  std::vector<float> out(nq), lse(nr), out_r(nq), lse_r(nr);
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  ref::attention_forward(out_r.data(), lse_r.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  EXPECT_LE(scaled_error(out, out_r), kTol) << "out";
  EXPECT_LE(scaled_error(lse, lse_r), kTol) << "lse";

  // Gradients accumulate: start both from the same non-zero values.
  Rng rng(99);
  auto init = [&](size_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = rng.uniform(-0.5f, 0.5f);
    return x;
  };
  const std::vector<float> dq0 = init(nq), dk0 = init(nkv), dv0 = init(nkv), ds0 = init(c.h),
                           dt0 = init(pb.table.size());
  std::vector<float> dq = dq0, dk = dk0, dv = dv0, ds = ds0, dt = dt0;
  std::vector<float> dq_r = dq0, dk_r = dk0, dv_r = dv0, ds_r = ds0, dt_r = dt0;
  const bool learn = c.learn == Learn::Yes;
  AttentionGrads g{learn ? ds.data() : nullptr, learn ? dt.data() : nullptr};
  AttentionGrads g_r{learn ? ds_r.data() : nullptr, learn ? dt_r.data() : nullptr};
  attention_backward(dq.data(), dk.data(), dv.data(), g, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                     out.data(), lse.data(), p);
  ref::attention_backward(dq_r.data(), dk_r.data(), dv_r.data(), g_r, pb.dout.data(), pb.q.data(), pb.k.data(),
                          pb.v.data(), out_r.data(), lse_r.data(), p);
  const GradTerms terms = grad_terms(pb);
  EXPECT_LE(gradient_error(dq, dq_r, terms.dq), kTolGrad) << "dq";
  EXPECT_LE(gradient_error(dk, dk_r, terms.dk), kTolGrad) << "dk";
  EXPECT_LE(gradient_error(dv, dv_r, terms.dv), kTol) << "dv";
  if (learn && c.bias != BiasPolicy::None) {
    if (c.bias == BiasPolicy::T5) {
      EXPECT_LE(scaled_error(dt, dt_r), kTolParam) << "dt5_table";
      EXPECT_NE(dt_r, dt0) << "the case must exercise the table gradient";
    } else {
      EXPECT_LE(scaled_error(ds, ds_r), kTolParam) << "dslopes";
      EXPECT_NE(ds_r, ds0) << "the case must exercise the slope gradient";
    }
  }
  // Parameters without a gradient pointer stay untouched.
  if (!learn || c.bias != BiasPolicy::T5) {
    EXPECT_EQ(dt, dt0);
  }
  if (!learn || (c.bias != BiasPolicy::Alibi && c.bias != BiasPolicy::AlibiSym)) {
    EXPECT_EQ(ds, ds0);
  }

  // Rows with no visible key: zero output, lse = −inf, zero gradient, never NaN.
  size_t empty = 0;
  for (size_t r = 0; r < nr; ++r) {
    if (lse_r[r] != -INFINITY) continue;
    ++empty;
    EXPECT_EQ(lse[r], -INFINITY) << "row " << r;
    for (int64_t d = 0; d < c.d; ++d) {
      EXPECT_EQ(out[r * c.d + d], 0.f) << "row " << r;
      EXPECT_EQ(dq[r * c.d + d], dq0[r * c.d + d]) << "row " << r;
    }
  }
  if (c.padding == Padding::AllMasked || c.padding == Padding::Batch0) {
    EXPECT_GT(empty, 0u) << "no empty row made";
  }
  for (const auto* x : {&out, &dq, &dk, &dv, &ds, &dt})
    for (float e : *x) ASSERT_TRUE(std::isfinite(e)) << "non-finite value";
}

// GradInit::Overwrite into NaN-filled buffers must give exactly what accumulating into zeros gives
// (0 + x == x), and no NaN may survive: every element of dq, dk, dv is written, including keys
// no query sees (S > T prefixes, windows, padding) and rows with no visible key.
TEST_P(AttentionCase, OverwriteEqualsAccumulateIntoZeros) {
  const Problem pb(GetParam());
  const AttentionParams p = pb.params();
  const size_t nq = pb.n_q(), nkv = pb.n_kv(), nr = pb.n_rows();
  std::vector<float> out(nq), lse(nr);
  attention_forward(out.data(), lse.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  std::vector<float> dq(nq, 0.f), dk(nkv, 0.f), dv(nkv, 0.f);
  std::vector<float> dq_w(nq, NAN), dk_w(nkv, NAN), dv_w(nkv, NAN);
  attention_backward(dq.data(), dk.data(), dv.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(), pb.v.data(),
                     out.data(), lse.data(), p);
  attention_backward(dq_w.data(), dk_w.data(), dv_w.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(),
                     pb.v.data(), out.data(), lse.data(), p, GradInit::Overwrite);
  for (size_t i = 0; i < nq; ++i) ASSERT_EQ(dq_w[i], dq[i]) << "dq " << i;
  for (size_t i = 0; i < nkv; ++i) ASSERT_EQ(dk_w[i], dk[i]) << "dk " << i;
  for (size_t i = 0; i < nkv; ++i) ASSERT_EQ(dv_w[i], dv[i]) << "dv " << i;
}

// Strided operands (AttentionLayout): q inside a [B, T, 3·H·D] buffer (the fused QKV projection's
// output; k and v slots filled with garbage), k and v interleaved in a [B, S, 2·H·D] buffer, out
// and dout in [B, T, H·D]. The fast kernel and the reference on the strided layout must give what
// the packed reference gives (same kTol), and elements outside the operands must stay untouched.
TEST_P(AttentionCase, StridedLayoutMatchesPacked) {
  const Problem pb(GetParam());
  const AttnCase& c = pb.c;
  const int64_t B = c.b, H = c.h, T = c.t, S = c.s, D = c.d, HD = H * D;
  AttentionParams ps = pb.params();
  ps.layout.q = {.batch = T * 3 * HD, .head = D, .row = 3 * HD};
  ps.layout.kv = {.batch = S * 2 * HD, .head = D, .row = 2 * HD};
  ps.layout.out = {.batch = T * HD, .head = D, .row = HD};
  // packed [B, H, N, D] index of (b, h, n, d) vs strided element b·batch + h·head + n·row + d.
  auto scatter = [&](const std::vector<float>& packed, std::vector<float>& dst, int64_t off, RowStrides r, int64_t N) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t d = 0; d < D; ++d)
            dst[off + b * r.batch + h * r.head + n * r.row + d] = packed[((b * H + h) * N + n) * D + d];
  };
  auto gather = [&](const std::vector<float>& src, int64_t off, RowStrides r, int64_t N) {
    std::vector<float> packed(static_cast<size_t>(B * H * N * D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t d = 0; d < D; ++d)
            packed[((b * H + h) * N + n) * D + d] = src[off + b * r.batch + h * r.head + n * r.row + d];
    return packed;
  };
  const float kGarbage = 1234.5f;
  std::vector<float> qkv(static_cast<size_t>(B * T * 3 * HD), kGarbage), kv(static_cast<size_t>(B * S * 2 * HD), kGarbage);
  std::vector<float> dout_s(static_cast<size_t>(B * T * HD));
  scatter(pb.q, qkv, 0, ps.layout.q, T);
  scatter(pb.k, kv, 0, ps.layout.kv, S);
  scatter(pb.v, kv, HD, ps.layout.kv, S);
  scatter(pb.dout, dout_s, 0, ps.layout.out, T);

  const AttentionParams p = pb.params();
  std::vector<float> out_r(pb.n_q()), lse_r(pb.n_rows());
  ref::attention_forward(out_r.data(), lse_r.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  std::vector<float> dq_r(pb.n_q(), 0.f), dk_r(pb.n_kv(), 0.f), dv_r(pb.n_kv(), 0.f);
  ref::attention_backward(dq_r.data(), dk_r.data(), dv_r.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(),
                          pb.v.data(), out_r.data(), lse_r.data(), p);
  const GradTerms terms = grad_terms(pb);
  for (int impl = 0; impl < 2; ++impl) {
    SCOPED_TRACE(impl == 0 ? "fast" : "reference");
    std::vector<float> out_s(static_cast<size_t>(B * T * HD)), lse(pb.n_rows());
    std::vector<float> dqkv(qkv.size(), kGarbage), dkv(kv.size(), kGarbage);
    auto fwd = impl == 0 ? static_cast<void (*)(float*, float*, const float*, const float*, const float*,
                                                const AttentionParams&)>(&attention_forward)
                         : static_cast<void (*)(float*, float*, const float*, const float*, const float*,
                                                const AttentionParams&)>(&ref::attention_forward);
    fwd(out_s.data(), lse.data(), qkv.data(), kv.data(), kv.data() + HD, ps);
    EXPECT_LE(scaled_error(gather(out_s, 0, ps.layout.out, T), out_r), kTol) << "out";
    EXPECT_LE(scaled_error(lse, lse_r), kTol) << "lse";
    // Gradients accumulate into zeros at the operand positions, garbage elsewhere.
    scatter(std::vector<float>(pb.n_q(), 0.f), dqkv, 0, ps.layout.q, T);
    scatter(std::vector<float>(pb.n_kv(), 0.f), dkv, 0, ps.layout.kv, S);
    scatter(std::vector<float>(pb.n_kv(), 0.f), dkv, HD, ps.layout.kv, S);
    if (impl == 0)
      attention_backward(dqkv.data(), dkv.data(), dkv.data() + HD, {}, dout_s.data(), qkv.data(), kv.data(),
                         kv.data() + HD, out_s.data(), lse.data(), ps);
    else
      ref::attention_backward(dqkv.data(), dkv.data(), dkv.data() + HD, {}, dout_s.data(), qkv.data(), kv.data(),
                              kv.data() + HD, out_s.data(), lse.data(), ps);
    EXPECT_LE(gradient_error(gather(dqkv, 0, ps.layout.q, T), dq_r, terms.dq), kTolGrad) << "dq";
    EXPECT_LE(gradient_error(gather(dkv, 0, ps.layout.kv, S), dk_r, terms.dk), kTolGrad) << "dk";
    EXPECT_LE(gradient_error(gather(dkv, HD, ps.layout.kv, S), dv_r, terms.dv), kTol) << "dv";
    // The k/v slots of the qkv gradient buffer are not the kernel's: untouched.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t x = HD; x < 3 * HD; ++x) ASSERT_EQ(dqkv[(b * T + t) * 3 * HD + x], kGarbage);
  }
}

// From 1,024 keys the forward packs V's interleaved rows (a fused projection's layout) contiguous
// per head before its products (attention_cpu.cpp, pack_rows): the same values in the same order,
// so the strided forward must equal the packed-layout forward bitwise, with 1 and 2 threads, and
// match the reference. Keys ≥ 1,024 with a partial last tile, ALiBi, two batches, memory before
// the queries (S > T).
TEST(AttentionLayout, LongKeysStridedForwardIsBitwiseThePackedOne) {
  const Problem pb({.name = "long_keys", .b = 2, .h = 2, .t = 70, .s = 1100, .d = 16,
                    .bias = BiasPolicy::Alibi, .padding = Padding::Some});
  const int64_t B = 2, H = 2, T = 70, S = 1100, D = 16, HD = H * D;
  const AttentionParams p = pb.params();
  AttentionParams ps = p;
  ps.layout.q = {.batch = T * HD, .head = D, .row = HD};
  ps.layout.kv = {.batch = S * 2 * HD, .head = D, .row = 2 * HD};
  ps.layout.out = ps.layout.q;
  std::vector<float> q(static_cast<size_t>(B * T * HD)), kv(static_cast<size_t>(B * S * 2 * HD));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t t = 0; t < T; ++t) q[(b * T + t) * HD + h * D + d] = pb.q[((b * H + h) * T + t) * D + d];
        for (int64_t j = 0; j < S; ++j) {
          kv[(b * S + j) * 2 * HD + h * D + d] = pb.k[((b * H + h) * S + j) * D + d];
          kv[(b * S + j) * 2 * HD + HD + h * D + d] = pb.v[((b * H + h) * S + j) * D + d];
        }
      }
  std::vector<float> out_r(pb.n_q()), lse_r(pb.n_rows());
  ref::attention_forward(out_r.data(), lse_r.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const int before = num_threads();
    set_num_threads(threads);
    std::vector<float> out_p(pb.n_q()), lse_p(pb.n_rows()), out_s(pb.n_q()), lse_s(pb.n_rows());
    attention_forward(out_p.data(), lse_p.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
    attention_forward(out_s.data(), lse_s.data(), q.data(), kv.data(), kv.data() + HD, ps);
    set_num_threads(before);
    EXPECT_LE(scaled_error(out_p, out_r), kTol) << "packed layout vs reference";
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d)
            ASSERT_EQ(out_s[(b * T + t) * HD + h * D + d], out_p[((b * H + h) * T + t) * D + d])
                << "b " << b << " h " << h << " t " << t << " d " << d;
    ASSERT_EQ(lse_s, lse_p);
  }
}

// gradient_error must still catch real bugs. dq and dk are rebuilt here in double from the
// reference's probabilities (testing::probabilities), correctly — which must pass, a check of
// grad_terms' inputs — and with a term dropped or a wrong scale, which must fail by far, both
// where the true gradient is exactly 0 (win1_none) and in ordinary cases.
TEST(AttentionMetric, CatchesAWrongGradient) {
  for (const char* name : {"win1_none", "t70_h8_d64_alibi", "dropout_alibi", "pad_some_none"}) {
    SCOPED_TRACE(name);
    const auto all = cases();
    const auto it = std::find_if(all.begin(), all.end(), [&](const AttnCase& c) { return c.name == name; });
    ASSERT_NE(it, all.end());
    const Problem pb(*it);
    const AttentionParams p = pb.params();
    const int64_t BH = it->b * it->h, T = it->t, S = it->s, D = it->d;
    const double scale = attention_scale(p);
    std::vector<float> out_r(pb.n_q()), lse_r(pb.n_rows()), dq_r(pb.n_q(), 0.f), dk_r(pb.n_kv(), 0.f),
        dv_r(pb.n_kv(), 0.f);
    ref::attention_forward(out_r.data(), lse_r.data(), pb.q.data(), pb.k.data(), pb.v.data(), p);
    ref::attention_backward(dq_r.data(), dk_r.data(), dv_r.data(), {}, pb.dout.data(), pb.q.data(), pb.k.data(),
                            pb.v.data(), out_r.data(), lse_r.data(), p);
    const GradTerms terms = grad_terms(pb);
    const std::vector<double> P = testing::probabilities(pb, false), PZ = testing::probabilities(pb, true);
    // variant 0: correct; 1: without delta (dS = P·dP); 2: without dP (dS = −P·delta); 3: scale²
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<double> dq(pb.n_q(), 0.0), dk(pb.n_kv(), 0.0);
      for (int64_t bh = 0; bh < BH; ++bh)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t r = bh * T + i;
          std::vector<double> dp(S);
          double delta = 0.0;
          for (int64_t j = 0; j < S; ++j) {
            double dot = 0.0;
            for (int64_t d = 0; d < D; ++d) dot += double(pb.dout[r * D + d]) * pb.v[(bh * S + j) * D + d];
            dp[j] = P[r * S + j] > 0.0 ? dot * PZ[r * S + j] / P[r * S + j] : 0.0;  // Z_ij · dout_i·v_j
            delta += P[r * S + j] * dp[j];
          }
          for (int64_t j = 0; j < S; ++j) {
            const double pij = P[r * S + j];
            double ds = variant == 1 ? pij * dp[j] : variant == 2 ? -pij * delta : pij * (dp[j] - delta);
            ds *= variant == 3 ? scale * scale : scale;
            for (int64_t d = 0; d < D; ++d) {
              dq[r * D + d] += ds * pb.k[(bh * S + j) * D + d];
              dk[(bh * S + j) * D + d] += ds * pb.q[r * D + d];
            }
          }
        }
      const std::vector<float> dqf(dq.begin(), dq.end()), dkf(dk.begin(), dk.end());
      const double eq = gradient_error(dqf, dq_r, terms.dq), ek = gradient_error(dkf, dk_r, terms.dk);
      if (variant == 0) {
        EXPECT_LE(eq, kTolGrad) << "correct dq";
        EXPECT_LE(ek, kTolGrad) << "correct dk";
      } else if (variant == 3 && std::string(name) == "win1_none") {
        EXPECT_LE(eq, kTolGrad) << "0 · any scale is still 0";
        EXPECT_LE(ek, kTolGrad) << "0 · any scale is still 0";
      } else {
        EXPECT_GT(eq, 100 * kTolGrad) << "wrong dq, variant " << variant << ": " << eq;
        EXPECT_GT(ek, 100 * kTolGrad) << "wrong dk, variant " << variant << ": " << ek;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, AttentionCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AttnCase>& i) { return i.param.name; });

}  // namespace
}  // namespace stretch::ops
