// ops/attention_exp.h — internal to the fused kernel (attention_cpu*.cpp): the softmax exponentials of the fused
// attention kernel, per row of one score tile.
//   exp_row(s, n, sub):            s ← exp(s − sub), flushed below e^−60; returns Σ s
//   exp_row_lazy(s, n, m_old, lazy, &m_new): the forward's online-softmax step for one row of
//                                  scores (builds without AVX-512): m_new = the row max if it
//                                  exceeds m_old + lazy, else m_old; then exp_row(s, n, m_new)
//   exp2_row_lazy(s, n, lo, hi, scale2, bias2, m_old, lazy2, &m_new): the same step in log2 units
//                                  from raw dot products, bias and mask included (AVX-512 and
//                                  AVX2 + FMA builds: every forward row)
// exp_row and exp2_row_lazy have a reference form (exp_row_reference: glibc's vector expf;
// exp2_row_lazy_reference: plain loops) and, on AVX-512 and on AVX2 + FMA, a fast form with the
// exponential inlined; tests/ops/test_attention_exp.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "ops/attention_lanes.h"
#include "ops/simd_math.h"

// glibc's libmvec provides vector expf (_ZGVeN16v_expf, _ZGVdN8v_expf, ...). Declaring expf
// with the simd attribute (what glibc's own <math.h> does under -ffast-math) lets the loop
// vectoriser call it without -ffast-math; `const` says it leaves errno alone, which holds for
// the only arguments this kernel passes (exp_row_reference clamps them to [−60, 8]) and lets GCC
// if-convert the clamp around the call. Where this does not apply the loops call scalar
// expf: the same results up to libm's ulp error, so correctness never depends on it.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
extern "C" float expf(float) noexcept __attribute__((simd("notinbranch"), const));
#endif

namespace stretch::ops::attn {

// s[0..n) ← exp(s − sub) for the softmax's s ≤ sub (sub = running max, or lse), flushed to 0
// below about e^−60 (and for s = −inf); returns the sum. A flushed term is ≥ 1e18 times smaller
// than the row's largest one and cannot change a float sum, while keeping it would feed
// denormal products to the backward GEMMs. The argument is clamped at −60 first (a NaN
// argument, too, becomes −60 and so 0).
//   exp_row_reference: the libmvec form (glibc's vector expf, ≤ 4 ulp), kept as the reference
//     of the fast forms and as the path of builds without AVX2 + FMA.
//   exp_row (AVX-512): the same contract with exp inlined (simd::exp_vec16, ≤ 2 ulp): no call
//     into libmvec per 16 lanes, no separate clamp pass (libmvec's vector expf calls scalar
//     expf lane by lane for out-of-range arguments, so the reference needs one).
//   exp_row (AVX2 + FMA): the same with simd::exp_vec8 (exp_vec16's arithmetic in 8 lanes).
inline float exp_row_reference(float* s, int n, float sub) {
#pragma omp simd
  for (int jj = 0; jj < n; ++jj) {
    const float x = s[jj] - sub;
    s[jj] = x > -60.f ? x : -60.f;
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int jj = 0; jj < n; ++jj) {
    const float e = expf(s[jj]);
    s[jj] = e > 1e-26f ? e : 0.f;  // e^−60 = 8.8e−27
    sum += s[jj];
  }
  return sum;
}

#if defined(__AVX512F__)
using simd::exp_vec16;
using simd::first_lanes;
using simd::max_lanes;
using simd::sum_lanes;

// One vector of the exp pass: flush(exp(max(v − sub, −60))) on the lanes of k, 0 elsewhere.
// max(x, −60) returns −60 for a NaN x (vmaxps returns its second operand then).
inline __m512 exp_lanes(__m512 v, __m512 sub, __mmask16 k) {
  const __m512 d = _mm512_sub_ps(v, sub);
  const __m512 x = _mm512_mask_max_ps(d, 0xFFFF, d, _mm512_set1_ps(-60.f));
  const __m512 e = exp_vec16(x);
  return _mm512_maskz_mov_ps(_mm512_mask_cmp_ps_mask(k, e, _mm512_set1_ps(1e-26f), _CMP_GT_OQ), e);
}

inline float exp_row(float* s, int n, float sub) {
  const __m512 vsub = _mm512_set1_ps(sub);
  __m512 acc = _mm512_setzero_ps();
  for (int jj = 0; jj < n; jj += 16) {
    const __mmask16 k = first_lanes(n - jj);
    const __m512 y = exp_lanes(_mm512_maskz_loadu_ps(k, s + jj), vsub, k);
    _mm512_mask_storeu_ps(s + jj, k, y);
    acc = _mm512_add_ps(acc, y);
  }
  return sum_lanes(acc);
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 + FMA: the same contract with simd::exp_vec8 inlined and the clamp in the same pass.
// max(x, −60) returns −60 for a NaN x (vmaxps returns its second operand then).
inline __m256 exp_lanes8(__m256 v, __m256 sub) {
  const __m256 e = simd::exp_vec8(_mm256_max_ps(_mm256_sub_ps(v, sub), _mm256_set1_ps(-60.f)));
  return _mm256_and_ps(_mm256_cmp_ps(e, _mm256_set1_ps(1e-26f), _CMP_GT_OQ), e);
}

inline float exp_row(float* s, int n, float sub) {
  const __m256 vsub = _mm256_set1_ps(sub);
  __m256 acc = _mm256_setzero_ps();
  int jj = 0;
  for (; jj + 8 <= n; jj += 8) {
    const __m256 y = exp_lanes8(_mm256_loadu_ps(s + jj), vsub);
    _mm256_storeu_ps(s + jj, y);
    acc = _mm256_add_ps(acc, y);
  }
  if (jj < n) {  // the last n − jj < 8: masked load and store, the other lanes kept out of the sum
    const __m256i k = simd::first_lanes8(n - jj);
    const __m256 y = _mm256_and_ps(exp_lanes8(_mm256_maskload_ps(s + jj, k), vsub), _mm256_castsi256_ps(k));
    _mm256_maskstore_ps(s + jj, k, y);
    acc = _mm256_add_ps(acc, y);
  }
  return simd::sum_lanes8(acc);
}
#else
inline float exp_row(float* s, int n, float sub) { return exp_row_reference(s, n, sub); }
#endif

// The forward's step of the online softmax for one row (lazy rescaling: the reference point
// only moves when the row's maximum exceeds it by more than `lazy`). The maximum skips NaN.
// (AVX-512 and AVX2 + FMA builds run exp2_row_lazy below instead, for every row.)
inline float exp_row_lazy(float* s, int n, float m_old, float lazy, float* m_new) {
  const float mx = simd::max_skip_nan(s, n);
  const float m = mx > m_old + lazy ? mx : m_old;
  *m_new = m;
  if (m == -std::numeric_limits<float>::infinity()) {  // nothing visible in this row yet
    std::fill(s, s + n, 0.f);
    return 0.f;
  }
  return exp_row(s, n, m);
}

// The forward's online-softmax step in log2 units, from one row of raw dot products s[0..n):
//   x_jj = s_jj·scale2 + bias2_jj for lo ≤ jj < hi (the row's visible keys), −inf elsewhere, where
//          scale2 = scale·log2 e and bias2 = bias·log2 e (the score times log2 e);
//   m_new = the largest x if it exceeds m_old + lazy2, else m_old (NaN skipped);
//   s_jj ← 2^(x_jj − m_new), flushed to 0 at or below 2^kFlush2 (≈ e^−60, as exp_row) and for NaN.
// Returns Σ s. One pass over registers for the bias, the mask, the lazy maximum and the exp, so
// the scores are read and written once; no ln 2 reduction in the exponential. Rows whose score
// needs passes of its own first (relative keys, span mask, key padding) pass their finished
// natural-unit scores with scale2 = log2 e, a zero bias and [lo, hi) = [0, n) (−inf for masked).
//   exp2_row_lazy_reference: plain loops (fmaf for x, so the same x and m_new; exp2f for the
//     exponential), the reference of the fast form (tests/ops/test_attention_exp.cpp);
//   exp2_row_lazy (AVX-512, and AVX2 + FMA below; n ≤ 64): bias2(q, k) gives lanes
//     kRowLanes·q .. kRowLanes·(q+1) − 1 of bias2 (k: the lanes inside the row; attention_lanes.h).
inline constexpr float kFlush2 = -86.5f;  // 2^−86.5 = 1.1e−26; e^−60 = 8.8e−27

template <class Bias2>
inline float exp2_row_lazy_reference(float* s, int n, int lo, int hi, float scale2, const Bias2& bias2, float m_old,
                                     float lazy2, float* m_new) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float mx = -kInf;
  for (int jj = 0; jj < n; ++jj) {
    s[jj] = jj >= lo && jj < hi ? std::fma(s[jj], scale2, bias2(jj)) : -kInf;
    mx = s[jj] > mx ? s[jj] : mx;
  }
  const float m = mx > m_old + lazy2 ? mx : m_old;
  *m_new = m;
  float sum = 0.f;
  for (int jj = 0; jj < n; ++jj) {
    const float t = s[jj] - m;
    s[jj] = t > kFlush2 ? std::exp2(t) : 0.f;  // 0 for NaN t (an invisible key with m = −inf: −inf − −inf)
    sum += s[jj];
  }
  return sum;
}

#if defined(__AVX512F__)
template <class Bias2>
inline float exp2_row_lazy(float* s, int n, int lo, int hi, float scale2, const Bias2& bias2, float m_old,
                           float lazy2, float* m_new) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 thr = _mm512_set1_ps(m_old + lazy2);
  const __m512 vs = _mm512_set1_ps(scale2);
  const int nv = (n + 15) / 16;
  __m512 x[4] = {ninf, ninf, ninf, ninf};  // x of lanes 16q .. 16q+15
  __mmask16 k[4] = {0, 0, 0, 0};
  __mmask16 over = 0;
  for (int q = 0; q < 4; ++q) {
    if (q >= nv) break;
    const __mmask16 in = first_lanes(n - 16 * q);
    k[q] = static_cast<__mmask16>(first_lanes(hi - 16 * q) & ~first_lanes(lo - 16 * q) & in);
    // Lanes outside k are never read below (the compare, the maximum and the exp are masked by k).
    x[q] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(in, s + 16 * q), vs, bias2(q, in));
    over = static_cast<__mmask16>(over | _mm512_mask_cmp_ps_mask(k[q], x[q], thr, _CMP_GT_OQ));
  }
  float m = m_old;
  if (over != 0) {
    __m512 mx = ninf;  // max(v, mx) returns mx where v is NaN
    for (int q = 0; q < 4; ++q)
      if (q < nv) mx = _mm512_mask_max_ps(mx, k[q], x[q], mx);
    m = max_lanes(mx);
  }
  *m_new = m;
  const __m512 vm = _mm512_set1_ps(m), flush = _mm512_set1_ps(kFlush2);
  __m512 acc = _mm512_setzero_ps();
  for (int q = 0; q < 4; ++q) {
    if (q >= nv) break;
    const __m512 t = _mm512_sub_ps(x[q], vm);
    const __m512 y = simd::exp2_maskz16(_mm512_mask_cmp_ps_mask(k[q], t, flush, _CMP_GT_OQ), t);
    _mm512_mask_storeu_ps(s + 16 * q, first_lanes(n - 16 * q), y);
    acc = _mm512_add_ps(acc, y);
  }
  return sum_lanes(acc);
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 + FMA (n ≤ 64): the same step in two passes over 8-lane vectors, as 16 ymm registers cannot
// hold a row's eight x vectors next to the constants: x (invisible lanes −inf), the lazy test and
// the maximum into an aligned buffer, then 2^(x − m) into s. bias2(q, k) gives lanes 8q .. 8q+7 of
// bias2 (k: the lanes inside the row, every bit of a lane set). Full: a whole visible row of 64
// (most rows of a tile), without masks. Masked stores are for a short row's tail only (slow on AMD).
template <bool Full, class Bias2>
inline float exp2_row_lazy8(float* s, int n, int lo, int hi, float scale2, const Bias2& bias2, float m_old,
                            float lazy2, float* m_new) {
  alignas(32) float xb[64];
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 thr = _mm256_set1_ps(m_old + lazy2);
  const __m256 vs = _mm256_set1_ps(scale2);
  const int nv = Full ? 8 : (n + 7) / 8;
  __m256 over = _mm256_setzero_ps(), mx = ninf;  // max(x, mx) returns mx where x is NaN
  for (int q = 0; q < nv; ++q) {
    __m256 x;
    if constexpr (Full) {
      x = _mm256_fmadd_ps(_mm256_loadu_ps(s + 8 * q), vs, bias2(q, _mm256_set1_epi32(-1)));
    } else {
      const __m256i in = simd::first_lanes8(n - 8 * q);
      const __m256i vis = _mm256_andnot_si256(simd::first_lanes8(lo - 8 * q),
                                              _mm256_and_si256(simd::first_lanes8(hi - 8 * q), in));
      const __m256 raw = 8 * q + 8 <= n ? _mm256_loadu_ps(s + 8 * q) : _mm256_maskload_ps(s + 8 * q, in);
      x = _mm256_blendv_ps(ninf, _mm256_fmadd_ps(raw, vs, bias2(q, in)), _mm256_castsi256_ps(vis));
    }
    over = _mm256_or_ps(over, _mm256_cmp_ps(x, thr, _CMP_GT_OQ));
    mx = _mm256_max_ps(x, mx);
    _mm256_store_ps(xb + 8 * q, x);
  }
  const float m = _mm256_movemask_ps(over) != 0 ? simd::max_lanes8(mx) : m_old;
  *m_new = m;
  const __m256 vm = _mm256_set1_ps(m), flush = _mm256_set1_ps(kFlush2);
  __m256 acc = _mm256_setzero_ps();
  for (int q = 0; q < nv; ++q) {
    const __m256 t = _mm256_sub_ps(_mm256_load_ps(xb + 8 * q), vm);
    const __m256 y = simd::exp2_keep8(_mm256_cmp_ps(t, flush, _CMP_GT_OQ), t);
    if (Full || 8 * q + 8 <= n) _mm256_storeu_ps(s + 8 * q, y);
    else _mm256_maskstore_ps(s + 8 * q, simd::first_lanes8(n - 8 * q), y);
    acc = _mm256_add_ps(acc, y);
  }
  return simd::sum_lanes8(acc);
}

template <class Bias2>
inline float exp2_row_lazy(float* s, int n, int lo, int hi, float scale2, const Bias2& bias2, float m_old,
                           float lazy2, float* m_new) {
  if (n == 64 && lo == 0 && hi == 64) return exp2_row_lazy8<true>(s, n, lo, hi, scale2, bias2, m_old, lazy2, m_new);
  return exp2_row_lazy8<false>(s, n, lo, hi, scale2, bias2, m_old, lazy2, m_new);
}
#endif

}  // namespace stretch::ops::attn
