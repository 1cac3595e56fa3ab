// tests/ops/test_attention_exp.cpp — the fused attention's softmax exponentials (ops/attention_exp.h):
// exp_row's contract (s ← exp(s − sub), flushed to 0 below e^−60, NaN and −inf to 0, the sum
// returned, nothing past n written) checked against double exp, the fast inline form (AVX-512 and
// AVX2 + FMA builds) against the libmvec reference form and both against double exp in ulps; the
// forward's lazy online-softmax step over finished scores (exp_row_lazy, and exp2_row_lazy in that
// use); the forward's log2-unit step (exp2_row_lazy, simd::exp2_maskz16 / exp2_keep8) against its
// reference and double exp2; and the same inline exp for any argument (simd::exp_any16 / exp_any8,
// the cross-entropy's) down to subnormals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "ops/attention_exp.h"
#include "ops/simd_math.h"

namespace stretch::ops::attn {
namespace {

// Distance in float ulps between y and the double value e (rounded to float, then counted in
// representable floats between them).
double ulps(float y, double e) {
  const float ef = static_cast<float>(e);
  if (y == ef) return 0.0;
  int32_t a, b;
  std::memcpy(&a, &y, 4);
  std::memcpy(&b, &ef, 4);
  // Both are positive here; the integer distance is the number of floats apart, plus the
  // rounding of e itself (≤ 0.5).
  return std::fabs(static_cast<double>(a) - static_cast<double>(b)) + 0.5;
}

// Floats of [lo, hi) taken every `stride` representable floats (lo < 0 < hi), as x with sub = 0.
std::vector<float> sampled(float lo, float hi, uint32_t stride) {
  std::vector<float> xs;
  auto bits_of = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u & 0x7fffffffu;
  };
  auto from = [](uint32_t mag, bool neg) {
    const uint32_t u = mag | (neg ? 0x80000000u : 0u);
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  for (uint32_t m = bits_of(lo); m >= stride; m -= stride) xs.push_back(from(m, true));  // lo .. −0
  for (uint32_t m = 0; m < bits_of(hi); m += stride) xs.push_back(from(m, false));        // 0 .. hi
  return xs;
}

// Max ulp error of exp_fn over the sample, and the flush rule checked per element.
template <class F>
double max_ulps(F exp_fn, const std::vector<float>& xs) {
  std::vector<float> s(xs);
  exp_fn(s.data(), static_cast<int>(s.size()), 0.f);
  double worst = 0.0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = std::exp(static_cast<double>(xs[i]));
    if (e < 0.9e-26) {
      EXPECT_EQ(s[i], 0.f) << "x = " << xs[i] << " must flush to 0";
      continue;
    }
    if (e < 1.1e-26) continue;  // at the flush threshold either answer is right
    worst = std::max(worst, ulps(s[i], e));
  }
  return worst;
}

TEST(AttentionExp, FastFormWithinTwoUlpsOfDoubleExp) {
  // [−60, 8]: the arguments the kernel passes (s − running max ≤ kLazy = 8; clamped at −60).
  const std::vector<float> xs = sampled(-60.f, 8.f, 97);  // ~22 M floats
  ASSERT_GT(xs.size(), 1000000u);
  const double fast = max_ulps(exp_row, xs);
#if defined(__AVX512F__)
  EXPECT_LE(fast, 2.0) << "exp_row (inline AVX-512 form) vs double exp";
#elif defined(__AVX2__) && defined(__FMA__)
  EXPECT_LE(fast, 2.0) << "exp_row (inline AVX2 form) vs double exp";
#else
  EXPECT_LE(fast, 4.0) << "exp_row (the libmvec form on this build) vs double exp";
#endif
  const double ref = max_ulps(exp_row_reference, xs);
  EXPECT_LE(ref, 4.0) << "libmvec expf vs double exp (its documented bound)";
}

TEST(AttentionExp, SumIsTheSumOfTheWrittenTerms) {
  for (int n : {1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100}) {
    std::vector<float> s(static_cast<size_t>(n) + 8, 123.f);  // 8 guards past n
    for (int j = 0; j < n; ++j) s[j] = -0.37f * static_cast<float>(j % 23) + 0.11f * static_cast<float>(j % 5);
    const std::vector<float> in(s);
    const float sum = exp_row(s.data(), n, 0.25f);
    double want = 0.0, got = 0.0;
    for (int j = 0; j < n; ++j) {
      const double e = std::exp(static_cast<double>(in[j] - 0.25f));  // the kernel subtracts in float
      EXPECT_NEAR(s[j], e, 5e-7 * e) << "n " << n << " j " << j;  // ≤ 4 ulp: either form
      want += e, got += s[j];
    }
    EXPECT_NEAR(sum, got, 1e-6 * got) << "n " << n;
    EXPECT_NEAR(sum, want, 2e-6 * want) << "n " << n;
    for (int j = n; j < n + 8; ++j) EXPECT_EQ(s[j], 123.f) << "wrote past n = " << n;
  }
}

TEST(AttentionExp, SpecialValuesAsTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Masked entries (−inf), NaN scores, an empty row's +inf subtrahend, far below the flush, at 0,
  // at the kernel's largest argument.
  const std::vector<float> row = {-inf, nan, -1e30f, -61.f, -59.f, 0.f, 8.f, -0.f, 1e-30f, -87.f};
  for (float sub : {0.f, inf, 3.f}) {
    std::vector<float> a(row), b(row);
    const float sa = exp_row(a.data(), static_cast<int>(a.size()), sub);
    const float sb = exp_row_reference(b.data(), static_cast<int>(b.size()), sub);
    for (size_t j = 0; j < row.size(); ++j) {
      ASSERT_FALSE(std::isnan(a[j])) << "x = " << row[j] << " − " << sub;
      if (b[j] == 0.f) EXPECT_EQ(a[j], 0.f) << "x = " << row[j] << " − " << sub;
      else EXPECT_NEAR(a[j], b[j], 6.0 * 1.2e-7 * b[j]) << "x = " << row[j] << " − " << sub;
    }
    EXPECT_NEAR(sa, sb, 1e-6 * sb);
  }
  std::vector<float> one = {0.f};
  EXPECT_EQ(exp_row(one.data(), 1, 0.f), 1.f);  // exp(0) exactly 1
  EXPECT_EQ(one[0], 1.f);
}

// The lazy step over finished scores, both forms the forward uses: exp_row_lazy (natural units,
// builds without AVX-512 or AVX2 + FMA) and, on those, exp2_row_lazy given the scores with scale2 = log2 e and
// no bias (the rows with relative keys, a span mask or key padding). Checked against the rule
// computed here: m_new = the row maximum (NaN skipped) if it exceeds m_old + lazy, else m_old;
// each term exp(s − m_new) in double, 0 for −inf, NaN and below the flush; the sum; the guards.
TEST(AttentionExp, LazyStepOverFinishedScores) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  [[maybe_unused]] const float log2e = 1.44269504088896341f;
  Rng rng(11);
  int moved = 0, kept = 0, empty = 0;
  for (int n : {1, 5, 16, 17, 33, 48, 63, 64}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> row(static_cast<size_t>(n) + 4, 77.f);  // 4 guards
      const float spread = trial % 3 == 0 ? 1.f : 12.f;
      for (int j = 0; j < n; ++j) row[j] = rng.uniform(-spread, spread);
      if (trial % 5 == 1) row[trial % n] = nan;                      // NaN scores are skipped by the max
      if (trial % 5 == 2) for (int j = 0; j < n; j += 2) row[j] = -inf;  // masked keys
      if (trial % 7 == 3) std::fill(row.begin(), row.begin() + n, -inf);  // a row with nothing visible
      if (trial % 11 == 4) row[0] = -0.f, row[n - 1] = 0.f;
      const float m_olds[] = {-inf, -3.f, 0.5f, 4.f, 30.f};
      const float m_old = m_olds[trial % 5];
      // u: the units of the form under test (1 natural, log2 e for the log2 form).
      const auto check = [&](const std::vector<float>& got, float sum, float m_new, float u, const char* form) {
        // x = the score in the form's units as the kernel rounds it (one fma: no contraction with
        // the subtraction below)
        const auto x = [&](int j) { return std::fma(row[j], u, 0.f); };
        float mx = -inf;
        for (int j = 0; j < n; ++j)
          if (x(j) > mx) mx = x(j);
        const float want_m = mx > m_old * u + 8.f * u ? mx : m_old * u;
        ASSERT_EQ(m_new, want_m) << form << " n " << n << " trial " << trial;
        double want_sum = 0.0;
        for (int j = 0; j < n; ++j) {
          const float t = x(j) - m_new;  // the difference as the kernel rounds it
          const double tn = static_cast<double>(t) / u;  // in natural units
          if (std::isnan(t) || tn < -60.1) {
            ASSERT_EQ(got[j], 0.f) << form << " n " << n << " trial " << trial << " j " << j;
            continue;
          }
          if (tn < -59.9) continue;  // at the flush threshold either answer is right
          const double e = u == 1.f ? std::exp(static_cast<double>(t)) : std::exp2(static_cast<double>(t));
          ASSERT_NEAR(got[j], e, 6e-7 * e) << form << " n " << n << " trial " << trial << " j " << j;
          want_sum += got[j];
        }
        EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << form;
        for (int j = n; j < n + 4; ++j) ASSERT_EQ(got[j], 77.f) << form << " wrote past n = " << n;
      };
      std::vector<float> a(row);
      float ma = 1.f;
      const float sa = exp_row_lazy(a.data(), n, m_old, 8.f, &ma);
      check(a, sa, ma, 1.f, "exp_row_lazy");
#if STRETCH_ATTN_LOG2
      std::vector<float> b(row);
      float mb = 1.f;
      const auto no_bias = [](int, LaneMask) { return lanes_zero(); };
      const float sb = exp2_row_lazy(b.data(), n, 0, n, log2e, no_bias, m_old * log2e, 8.f * log2e, &mb);
      check(b, sb, mb, log2e, "exp2_row_lazy");
#endif
      moved += ma != m_old, kept += ma == m_old && ma != -inf, empty += ma == -inf;
    }
  }
  // Every branch was taken: the point moved, stayed, and rows with nothing visible.
  EXPECT_GT(moved, 20);
  EXPECT_GT(kept, 20);
  EXPECT_GT(empty, 5);
}

// The forward's log2-unit step, reference form: x = fma(s, scale2, bias2) on [lo, hi), the lazy
// maximum, 2^(x − m) flushed at 2^kFlush2, against double exp2 (glibc's exp2f: within one float).
TEST(AttentionExp, Log2StepReferenceAgainstDoubleExp2) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> bias(64), s(64);
  for (int j = 0; j < 64; ++j) bias[j] = -0.25f * static_cast<float>(63 - j), s[j] = 0.5f * static_cast<float>(j % 9);
  const auto b2 = [&](int jj) { return bias[jj]; };
  std::vector<float> a(s);
  float m = 0.f;
  const float sum = exp2_row_lazy_reference(a.data(), 64, 3, 60, 1.5f, b2, -inf, 11.5f, &m);
  float mx = -inf;
  for (int j = 3; j < 60; ++j) mx = std::max(mx, std::fma(s[j], 1.5f, bias[j]));
  EXPECT_EQ(m, mx) << "from −inf the reference point moves to the row maximum";
  double want = 0.0;
  for (int j = 0; j < 64; ++j) {
    if (j < 3 || j >= 60) {
      EXPECT_EQ(a[j], 0.f) << "key " << j << " is outside [lo, hi)";
      continue;
    }
    const double e = std::exp2(static_cast<double>(std::fma(s[j], 1.5f, bias[j]) - m));
    EXPECT_LE(ulps(a[j], e), 1.5) << j;  // at most one float from the rounded exp2
    want += e;
  }
  EXPECT_NEAR(sum, want, 1e-6 * want);
}

#if STRETCH_ATTN_LOG2
// 2^t over 16 floats on the lanes of the bit mask `keep`, 0 elsewhere: simd::exp2_maskz16, or
// simd::exp2_keep8 twice (AVX2 + FMA).
void exp2_16_floats(uint32_t keep, const float* in, float* out) {
#if defined(__AVX512F__)
  _mm512_storeu_ps(out, simd::exp2_maskz16(static_cast<__mmask16>(keep), _mm512_loadu_ps(in)));
#else
  for (int h = 0; h < 2; ++h) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i k = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(keep >> (8 * h))), bit), bit);
    _mm256_storeu_ps(out + 8 * h, simd::exp2_keep8(_mm256_castsi256_ps(k), _mm256_loadu_ps(in + 8 * h)));
  }
#endif
}

// 2^t (the forward's exponential in log2 units) within 1 ulp of double exp2 over the arguments
// the pass gives it (t = x − m ≤ lazy2 = 8·log2 e; flushed at or below kFlush2), i.e. at most one
// float from the correctly rounded value; lanes outside the mask are 0 whatever they hold.
TEST(AttentionExp, Exp2WithinOneUlpOfDoubleExp2) {
  const std::vector<float> xs = sampled(-87.f, 11.6f, 97);
  ASSERT_GT(xs.size(), 1000000u);
  double worst = 0.0;
  for (size_t i = 0; i < xs.size(); i += 16) {
    float in[16] = {}, out[16];
    const size_t m = std::min<size_t>(16, xs.size() - i);
    for (size_t j = 0; j < m; ++j) in[j] = xs[i + j];
    exp2_16_floats((1u << m) - 1u, in, out);
    for (size_t j = 0; j < m; ++j) worst = std::max(worst, ulps(out[j], std::exp2(static_cast<double>(in[j]))));
  }
  EXPECT_LE(worst, 1.5);  // at most one float from the rounded exp2 (the polynomial: ≤ 0.94 ulp)
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float sp[16] = {-inf, nan, inf, 0.f, -0.f, 1.f, -1.f, 10.5f, -86.f}, r[16];
  exp2_16_floats(0x01F8, sp, r);  // lanes 3..8
  EXPECT_EQ(r[0], 0.f);
  EXPECT_EQ(r[1], 0.f);
  EXPECT_EQ(r[2], 0.f);
  EXPECT_EQ(r[3], 1.f);
  EXPECT_EQ(r[4], 1.f);
  EXPECT_EQ(r[5], 2.f);
  EXPECT_EQ(r[6], 0.5f);
  EXPECT_NEAR(r[7], std::exp2(10.5), 1.2e-7 * std::exp2(10.5));
  EXPECT_NEAR(r[8], std::exp2(-86.0), 1.2e-7 * std::exp2(-86.0));
  for (int j = 9; j < 16; ++j) EXPECT_EQ(r[j], 0.f);
}

// The one-pass log2 step against its reference: the same reference point (bitwise: both form x
// by one fma), every term within one float of exp2 of the same float difference and 0 in the
// same places, the sums within float rounding; nothing past n written.
TEST(AttentionExp, Log2StepAsReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Rng rng(12);
  int moved = 0, kept = 0, empty = 0;
  for (int n : {1, 5, 16, 17, 33, 48, 63, 64}) {
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> row(static_cast<size_t>(n) + 4, 77.f), bias(64, 0.f);  // 4 guards
      const float spread = trial % 3 == 0 ? 1.f : 12.f;
      for (int j = 0; j < n; ++j) row[j] = rng.uniform(-spread, spread), bias[j] = rng.uniform(-20.f, 0.f);
      if (trial % 5 == 1) row[trial % n] = nan;
      if (trial % 6 == 2) bias[trial % n] = -1e30f;  // far below the flush
      int lo = 0, hi = n;
      if (trial % 4 == 1) lo = trial % n, hi = std::max(lo, n - trial % 7);  // a masked tile's run
      if (trial % 9 == 3) lo = hi = n / 2;                                    // nothing visible
      const float m_olds[] = {-inf, -3.f, 0.5f, 4.f, 40.f};
      const float m_old = m_olds[trial % 5];
      const float scale2 = trial % 2 ? 0.18033688f : 1.f;
      const auto fast_bias = [&](int q, LaneMask k) { return lanes_load(k, bias.data() + kRowLanes * q); };
      const auto ref_bias = [&](int jj) { return bias[jj]; };
      std::vector<float> a(row), b(row);
      float ma = 1.f, mb = 2.f;
      const float sa = exp2_row_lazy(a.data(), n, lo, hi, scale2, fast_bias, m_old, 11.5f, &ma);
      const float sb = exp2_row_lazy_reference(b.data(), n, lo, hi, scale2, ref_bias, m_old, 11.5f, &mb);
      ASSERT_EQ(std::memcmp(&ma, &mb, 4), 0) << "n " << n << " trial " << trial << ": m_new " << ma << " vs " << mb;
      for (int j = 0; j < n; ++j) {
        if (b[j] == 0.f) {
          ASSERT_EQ(a[j], 0.f) << "n " << n << " trial " << trial << " j " << j;
          continue;
        }
        const float t = std::fma(row[j], scale2, bias[j]) - mb;
        ASSERT_LE(ulps(a[j], std::exp2(static_cast<double>(t))), 1.5) << "n " << n << " trial " << trial << " j " << j;
      }
      EXPECT_NEAR(sa, sb, 2e-6 * sb + 1e-30) << "n " << n << " trial " << trial;
      for (int j = n; j < n + 4; ++j) ASSERT_EQ(a[j], 77.f) << "wrote past n = " << n;
      moved += ma != m_old, kept += ma == m_old && ma != -inf, empty += ma == -inf;
    }
  }
  EXPECT_GT(moved, 20);
  EXPECT_GT(kept, 20);
  EXPECT_GT(empty, 5);
}


// The cross-entropy's exp over 16 floats: simd::exp_any16, or simd::exp_any8 twice (AVX2 + FMA).
void exp_any_16_floats(const float* in, float* out) {
#if defined(__AVX512F__)
  _mm512_storeu_ps(out, simd::exp_any16(_mm512_loadu_ps(in)));
#else
  _mm256_storeu_ps(out, simd::exp_any8(_mm256_loadu_ps(in)));
  _mm256_storeu_ps(out + 8, simd::exp_any8(_mm256_loadu_ps(in + 8)));
#endif
}

// The cross-entropy's form: any x ≤ 0, subnormal results included, −inf → 0, NaN → NaN.
TEST(AttentionExp, AnyArgumentFormWithinTwoUlpsDownToSubnormals) {
  const std::vector<float> xs = sampled(-110.f, 0.f, 97);
  double worst = 0.0;
  for (size_t i = 0; i < xs.size(); i += 16) {
    float in[16] = {}, out[16];
    const size_t m = std::min<size_t>(16, xs.size() - i);
    for (size_t j = 0; j < m; ++j) in[j] = xs[i + j];
    exp_any_16_floats(in, out);
    for (size_t j = 0; j < m; ++j) {
      const double e = std::exp(static_cast<double>(in[j]));
      ASSERT_GE(out[j], 0.f) << in[j];
      if (e < 0.7e-45) {  // below half the smallest subnormal: rounds to 0
        EXPECT_EQ(out[j], 0.f) << "x = " << in[j];
        continue;
      }
      worst = std::max(worst, ulps(out[j], e));
    }
  }
  EXPECT_LE(worst, 2.0);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float sp[16] = {-inf, nan, 0.f, -0.f, -1e30f, -104.f, -87.f, 1.f}, r[16];
  exp_any_16_floats(sp, r);
  EXPECT_EQ(r[0], 0.f);
  EXPECT_TRUE(std::isnan(r[1])) << "a NaN logit must reach the loss";
  EXPECT_EQ(r[2], 1.f);
  EXPECT_EQ(r[3], 1.f);
  EXPECT_EQ(r[4], 0.f);
  EXPECT_EQ(r[5], 0.f);
  EXPECT_NEAR(r[6], std::exp(-87.0), 2.5e-7 * std::exp(-87.0));
  EXPECT_NEAR(r[7], std::exp(1.0), 2.5e-7 * std::exp(1.0));
}
#endif

// simd::max_skip_nan (the maxima of exp_row_lazy and the cross-entropy) against a plain loop: NaN
// skipped, −inf when nothing is above −inf, −FLT_MAX only when it is an element. The −inf case
// failed under clang before (its OpenMP max reduction starts each lane at −FLT_MAX, GCC's at −inf).
TEST(AttentionExp, MaxSkipsNanAndIsMinusInfinityWhenNothingIsVisible) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float lowest = std::numeric_limits<float>::lowest();
  Rng rng(5);
  for (int64_t n : {0, 1, 7, 8, 9, 16, 31, 64, 100}) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = rng.uniform(-5.f, 5.f);
      for (int64_t j = 0; j < n; ++j) {
        if (trial == 1 || (trial == 2 && j % 3)) x[j] = -inf;          // nothing visible / some masked
        if (trial == 3 || (trial == 4 && j % 2)) x[j] = nan;           // NaN skipped
        if (trial == 5) x[j] = j % 2 ? nan : -inf;                     // only −inf and NaN
        if (trial == 6) x[j] = j == n / 2 ? lowest : -inf;             // −FLT_MAX is a real element
        if (trial == 7) x[j] = lowest;
        if (trial == 8 && j == n - 1) x[j] = inf;
      }
      float want = -inf;
      for (float v : x)
        if (v > want) want = v;
      const float got = simd::max_skip_nan(x.data(), n);
      EXPECT_EQ(got, want) << "n " << n << " trial " << trial;
    }
  }
  EXPECT_EQ(simd::max_skip_nan(nullptr, 0), -inf);
}

}  // namespace
}  // namespace stretch::ops::attn
