#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "bf16_support.h"
#include "core/rng.h"
#include "ops/gemm.h"
#include "tensor/dtype.h"

namespace stretch::ops {

// fp32 GEMM vs a double-accumulating reference: relative error bound grows like K·eps;
// 1e-4 relative to the row's magnitude covers K up to ~1000 with margin (eps = 6e-8).
TEST(Gemm, MatchesReferenceAllTransposes) {
  Rng rng(1);
  for (int64_t m : {1, 7, 64}) for (int64_t n : {1, 5, 33}) for (int64_t k : {1, 3, 130}) {
    for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes}) {
      std::vector<float> a(m * k), b(k * n), c(m * n), r(m * n);
      for (auto& x : a) x = rng.uniform(-1, 1);
      for (auto& x : b) x = rng.uniform(-1, 1);
      for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
      GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = 0.5f, .beta = 1.0f};
      gemm(p, a.data(), b.data(), c.data());
      gemm_reference(p, a.data(), b.data(), r.data());
      for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << n << k;
    }
  }
}

// Bias, ReLU epilogue and bf16 inputs (the matmul-primitive route) against the same reference.
// Under Bf16 both sides round the inputs to bf16 identically (round to nearest even) and a
// product of two bf16 values is exact in fp32, so only the fp32 summation differs: the fp32
// tolerance above applies unchanged. Without bf16 matmul on this CPU the fp32 half still runs; the
// bf16 half checks the refusal, and the test is skipped loudly.
TEST(Gemm, BiasReluBf16MatchReference) {
  Rng rng(2);
  const bool bf16 = bf16_matmul_supported();
  for (GemmPrecision prec : {GemmPrecision::Fp32, GemmPrecision::Bf16}) {
    if (prec == GemmPrecision::Bf16 && !bf16) break;
    for (int64_t m : {1, 9, 64}) for (int64_t n : {1, 17, 40}) for (int64_t k : {1, 130})
      for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes})
        for (int variant = 0; variant < 3; ++variant) {  // 0: beta = 1; 1: bias; 2: bias + relu
          std::vector<float> a(m * k), b(k * n), bias(n), c(m * n), r(m * n);
          for (auto& x : a) x = rng.uniform(-1, 1);
          for (auto& x : b) x = rng.uniform(-1, 1);
          for (auto& x : bias) x = rng.uniform(-1, 1);
          for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = rng.uniform(-1, 1);
          GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .beta = variant == 0 ? 1.f : 0.f,
                       .bias = variant > 0 ? bias.data() : nullptr,
                       .epilogue = variant == 2 ? GemmEpilogue::Relu : GemmEpilogue::None, .precision = prec};
          gemm(p, a.data(), b.data(), c.data());
          gemm_reference(p, a.data(), b.data(), r.data());
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], r[i], 1e-4 * (1 + std::abs(r[i]))) << m << " " << n << " " << k << " v" << variant;
          if (variant == 2) {
            for (float x : c) ASSERT_GE(x, 0.f);
          }
        }
  }
  if (!bf16) {
    std::vector<float> a(9 * 17, 0.5f), b(17 * 40, 0.25f), bias(40, 1.f), c(9 * 40);
    for (int variant = 0; variant < 3; ++variant)
      testing::expect_bf16_refused([&] {
        gemm({.m = 9, .n = 40, .k = 17, .beta = variant == 0 ? 1.f : 0.f, .bias = variant > 0 ? bias.data() : nullptr,
              .epilogue = variant == 2 ? GemmEpilogue::Relu : GemmEpilogue::None, .precision = GemmPrecision::Bf16},
             a.data(), b.data(), c.data());
      });
    if (HasFailure()) return;
    GTEST_SKIP() << testing::bf16_skip_message() << " (the fp32 bias/ReLU checks passed)";
  }
}

// Bf16 must really round: on random inputs with K = 256 the bf16 product differs from the fp32 one
// by about sqrt(K)·2^-9·|a||b| ≈ 0.03 (bf16 keeps 8 mantissa bits), far above fp32 rounding.
TEST(Gemm, Bf16DiffersFromFp32ByBf16Rounding) {
  Rng rng(3);
  const int64_t m = 16, n = 16, k = 256;
  std::vector<float> a(m * k), b(k * n), c32(m * n), c16(m * n);
  for (auto& x : a) x = rng.uniform(-1, 1);
  for (auto& x : b) x = rng.uniform(-1, 1);
  gemm({.m = m, .n = n, .k = k}, a.data(), b.data(), c32.data());
  if (!bf16_matmul_supported()) {
    testing::expect_bf16_refused(
        [&] { gemm({.m = m, .n = n, .k = k, .precision = GemmPrecision::Bf16}, a.data(), b.data(), c16.data()); });
    if (HasFailure()) return;
    GTEST_SKIP() << testing::bf16_skip_message();
  }
  gemm({.m = m, .n = n, .k = k, .precision = GemmPrecision::Bf16}, a.data(), b.data(), c16.data());
  double worst = 0;
  for (size_t i = 0; i < c32.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(c32[i]) - c16[i]));
  EXPECT_GT(worst, 1e-3);
  EXPECT_LT(worst, 0.2);
}

// round_to_bf16 is tensor/dtype.h's float_to_bf16 element by element (ties to even, NaN stays
// NaN), with a leading dimension, and so is round_to_bf16_in_place; and a GEMM given pre-rounded
// operands (a16/b16, A also rounded in place) gives bitwise the result of the GEMM that
// rounds them itself, for every transpose combination, with the
// products run as fp32 FMAs on the bf16 values (Bf16Products::Fp32Fma, on every CPU) and natively
// (where oneDNN has bf16 matmul).
TEST(Gemm, PreRoundedBf16OperandsGiveTheSameResult) {
  Rng rng(4);
  {
    const int64_t rows = 3, cols = 5, ld = 7;
    std::vector<float> src(rows * ld);
    for (auto& x : src) x = rng.uniform(-3, 3);
    src[1] = 1.0f + 1.0f / 256;  // a tie: rounds to even (1.0)
    src[2] = std::nanf("");
    std::vector<uint16_t> dst(rows * cols);
    round_to_bf16(dst.data(), src.data(), rows, cols, ld);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float want = bf16_to_float(float_to_bf16(src[r * ld + c]));
        const float got = bf16_to_float(bf16{dst[r * cols + c]});
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got));
        } else {
          EXPECT_EQ(got, want) << r << "," << c;
        }
      }
  }
  // In place: the packed bf16 numbers round_to_bf16 writes to a copy, in the first half of the
  // floats' own buffer, for widths around the 16-lane blocks, row counts around the doubling rounds
  // and sizes above the threading threshold.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {1, 40}, {2, 16}, {3, 15}, {5, 17}, {8, 33},
                                   {9, 7}, {700, 1000}, {1025, 333}, {3, 100003}}) {
    std::vector<float> src(rows * cols);
    for (auto& x : src) x = rng.uniform(-3, 3);
    src[0] = 1.0f + 1.0f / 256;
    if (src.size() > 2) src[2] = std::nanf("");
    std::vector<uint16_t> packed(src.size());
    round_to_bf16(packed.data(), src.data(), rows, cols);
    std::vector<float> data = src;
    const uint16_t* got = round_to_bf16_in_place(data.data(), rows, cols);
    ASSERT_EQ(static_cast<const void*>(got), static_cast<const void*>(data.data()));
    for (int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(got[i], packed[i]) << rows << " x " << cols << " at " << i;
  }
  auto pre_rounded_is_the_same = [&rng] {
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes}) {
        const int64_t m = 33, n = 20, k = 70;
        std::vector<float> a(m * k), b(k * n), c1(m * n), c2(m * n), c3(m * n);
        for (auto& x : a) x = rng.uniform(-1, 1);
        for (auto& x : b) x = rng.uniform(-1, 1);
        for (size_t i = 0; i < c1.size(); ++i) c1[i] = c2[i] = c3[i] = rng.uniform(-1, 1);
        // As stored: A is [m, k] or [k, m]; B is [k, n] or [n, k].
        std::vector<uint16_t> a16(m * k), b16(k * n);
        round_to_bf16(a16.data(), a.data(), ta == Trans::Yes ? k : m, ta == Trans::Yes ? m : k);
        round_to_bf16(b16.data(), b.data(), tb == Trans::Yes ? n : k, tb == Trans::Yes ? k : n);
        GemmParams p{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .beta = 1.f,
                     .precision = GemmPrecision::Bf16};
        gemm(p, a.data(), b.data(), c1.data());
        p.a16 = a16.data();
        p.b16 = b16.data();
        // Garbage fp32 operands: the pre-rounded copies must be what is read.
        std::vector<float> junk_a(a.size(), 7.f), junk_b(b.size(), -7.f);
        gemm(p, junk_a.data(), junk_b.data(), c2.data());
        for (size_t i = 0; i < c1.size(); ++i) ASSERT_EQ(c1[i], c2[i]) << i;
        // A rounded in its own buffer (round_to_bf16_in_place).
        std::vector<float> a_in_place = a;
        p.a16 = round_to_bf16_in_place(a_in_place.data(), ta == Trans::Yes ? k : m, ta == Trans::Yes ? m : k);
        gemm(p, junk_a.data(), junk_b.data(), c3.data());
        for (size_t i = 0; i < c1.size(); ++i) ASSERT_EQ(c1[i], c3[i]) << "A rounded in place, " << i;
      }
  };
  {
    SCOPED_TRACE("fp32 FMAs on bf16 values");
    set_bf16_products(Bf16Products::Fp32Fma);
    pre_rounded_is_the_same();
    set_bf16_products(Bf16Products::Native);
  }
  if (!bf16_matmul_supported()) {
    std::vector<float> a(33 * 70, 0.5f), b(70 * 20, 0.25f), c(33 * 20, 0.f);
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    round_to_bf16(a16.data(), a.data(), 33, 70);
    round_to_bf16(b16.data(), b.data(), 70, 20);
    testing::expect_bf16_refused([&] {
      gemm({.m = 33, .n = 20, .k = 70, .precision = GemmPrecision::Bf16, .a16 = a16.data(), .b16 = b16.data()},
           a.data(), b.data(), c.data());
    });
    if (HasFailure()) return;
    GTEST_SKIP() << testing::bf16_skip_message() << " (round_to_bf16 and the Fp32Fma half were checked)";
  }
  SCOPED_TRACE("native bf16");
  pre_rounded_is_the_same();
}

}  // namespace stretch::ops

namespace stretch::ops {
namespace {

// Restores the process's GEMM library when a test that switches it ends.
struct LibraryGuard {
  GemmLibrary saved = gemm_library();
  ~LibraryGuard() { set_gemm_library(saved); }
};

}  // namespace

// Both libraries (and the mix of them) behind plain fp32 products (ops/gemm.h: gemm_library), whichever the CPU's
// default is, against the double-accumulating reference: every transpose, leading dimensions
// larger than the natural ones, alpha and beta (beta = 0 must overwrite a C full of NaN, which the
// linear layers' GradInit::Overwrite relies on), and the shapes that decided the choice — a weight
// gradient (Aᵀ·B, K = tokens) and a tall product — at a size the tests can afford.
TEST(Gemm, BothLibrariesMatchReference) {
  LibraryGuard guard;
  Rng rng(5);
  struct Shape { int64_t m, n, k; };
  const Shape shapes[] = {{1, 1, 1}, {7, 5, 3}, {64, 33, 130}, {96, 64, 1024}, {300, 48, 40}};
  for (GemmLibrary lib : {GemmLibrary::OneDnn, GemmLibrary::Mixed, GemmLibrary::OpenBlas}) {
    set_gemm_library(lib);
    ASSERT_EQ(gemm_library(), lib);
    for (const Shape& s : shapes)
      for (Trans ta : {Trans::No, Trans::Yes}) for (Trans tb : {Trans::No, Trans::Yes})
        for (int variant = 0; variant < 3; ++variant) {  // 0: packed, beta 0; 1: strided, beta 1; 2: alpha, beta
          const int64_t pad = variant == 1 ? 3 : 0;
          const int64_t lda = (ta == Trans::Yes ? s.m : s.k) + pad, ldb = (tb == Trans::Yes ? s.k : s.n) + pad,
                        ldc = s.n + pad;
          std::vector<float> a((ta == Trans::Yes ? s.k : s.m) * lda), b((tb == Trans::Yes ? s.n : s.k) * ldb),
              c(s.m * ldc), r(s.m * ldc);
          for (auto& x : a) x = rng.uniform(-1, 1);
          for (auto& x : b) x = rng.uniform(-1, 1);
          for (size_t i = 0; i < c.size(); ++i) c[i] = r[i] = variant == 0 ? std::nanf("") : rng.uniform(-1, 1);
          GemmParams p{.trans_a = ta, .trans_b = tb, .m = s.m, .n = s.n, .k = s.k,
                       .alpha = variant == 2 ? -0.75f : 1.f, .beta = variant == 0 ? 0.f : (variant == 1 ? 1.f : 0.5f),
                       .lda = lda, .ldb = ldb, .ldc = ldc};
          gemm(p, a.data(), b.data(), c.data());
          if (variant == 0) std::fill(r.begin(), r.end(), 0.f);  // the reference reads C even when beta is 0
          gemm_reference(p, a.data(), b.data(), r.data());
          const double tol = 1e-4 * std::sqrt(static_cast<double>(s.k) / 130 + 1);
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              const float got = c[i * ldc + j], want = r[i * ldc + j];
              ASSERT_NEAR(got, want, tol * (1 + std::abs(want)))
                  << gemm_library_name(lib) << " m" << s.m << " n" << s.n << " k" << s.k << " v" << variant;
            }
          for (int64_t i = 0; i < s.m; ++i)  // the padding of C is not written
            for (int64_t j = s.n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], r[i * ldc + j]);
        }
  }
}

// The two libraries really are different code (so the test above checks two routes, not one):
// on a product with K = 1024 their fp32 sums differ in rounding somewhere, by far less than the
// tolerance, and each is deterministic (the same call twice gives the same bits).
TEST(Gemm, LibrariesDifferOnlyInRoundingAndAreDeterministic) {
  LibraryGuard guard;
  Rng rng(6);
  const int64_t m = 128, n = 96, k = 1024;
  std::vector<float> a(k * m), b(k * n);
  for (auto& x : a) x = rng.uniform(-1, 1);
  for (auto& x : b) x = rng.uniform(-1, 1);
  auto run = [&](GemmLibrary lib) {
    set_gemm_library(lib);
    std::vector<float> c(m * n);
    gemm({.trans_a = Trans::Yes, .m = m, .n = n, .k = k}, a.data(), b.data(), c.data());
    return c;
  };
  const std::vector<float> d1 = run(GemmLibrary::OneDnn), o1 = run(GemmLibrary::OpenBlas);
  EXPECT_EQ(run(GemmLibrary::OneDnn), d1);
  EXPECT_EQ(run(GemmLibrary::OpenBlas), o1);
  EXPECT_EQ(run(GemmLibrary::Mixed), o1);  // the mix sends Aᵀ·B to OpenBLAS
  {  // ... and A·B to oneDNN
    std::vector<float> bt(k * n);
    for (int64_t i = 0; i < k * n; ++i) bt[i] = b[i];
    auto run_nn = [&](GemmLibrary lib) {
      set_gemm_library(lib);
      std::vector<float> c(m * n);
      gemm({.m = m, .n = n, .k = k}, a.data(), bt.data(), c.data());  // a read as [m, k]
      return c;
    };
    const std::vector<float> nn_d = run_nn(GemmLibrary::OneDnn), nn_o = run_nn(GemmLibrary::OpenBlas);
    EXPECT_NE(nn_d, nn_o) << "A·B: the libraries round alike here; the routing check below proves nothing";
    EXPECT_EQ(run_nn(GemmLibrary::Mixed), nn_d);
  }
  int64_t differ = 0;
  double worst = 0;
  for (size_t i = 0; i < d1.size(); ++i) {
    differ += d1[i] != o1[i];
    worst = std::max(worst, std::abs(static_cast<double>(d1[i]) - o1[i]));
  }
  EXPECT_GT(differ, 0) << "oneDNN and OpenBLAS gave identical bits on all " << d1.size() << " outputs";
  EXPECT_LT(worst, 1e-3);
}

}  // namespace stretch::ops
