// ops/simd_math.h — vector transcendental functions for the fast CPU paths (internal).
// Contract: `#pragma omp simd` loops that call ::expf / ::erff / ::tanhf / ::sinf / ::cosf are vectorised
// into glibc's libmvec variants (_ZGVeN16v_expf on AVX-512, _ZGVdN8v_expf on AVX2; ≤ 4 ulp,
// special values handled as the scalar functions). glibc declares these variants only under
// -ffast-math; we redeclare the same `omp declare simd` clauses here so the rest of the build
// keeps IEEE semantics. Outside glibc/x86-64 the loops stay scalar and still correct.
// On AVX-512 builds also an inline exp (simd::exp_vec16, ≤ 2 ulp; no call per 16 lanes) for the
// softmax loops of the attention kernel (ops/attention_exp.h) and the cross-entropy; on AVX2 + FMA
// builds its 8-lane forms (simd::exp_vec8 for the attention kernel's exp_row, simd::exp_any8 for
// the cross-entropy).
#pragma once
#include <math.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP) && !defined(__clang__)
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
float erff(float) noexcept;
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
}
#define STRETCH_HAVE_LIBMVEC 1
#endif

namespace stretch::ops::simd {

// The polynomials of the inline exponentials below, coefficients from the highest degree down,
// evaluated by Horner's rule with one FMA per step (the same operations in the same order at
// every vector width, so the polynomial has the same value in the 8- and 16-lane forms):
//   kExpTaylor: e^r on |r| ≤ ln2/2, the degree-7 Taylor polynomial (truncation r^8/8! ≤ 5.3e−9
//               relative, under a tenth of an ulp);
//   kExp2Remez: 2^f on [−½, ½], degree 6 (Remez; relative error 1.9e−9, ≤ 0.94 ulp in float).
inline constexpr float kExpTaylor[] = {1.f / 5040.f, 1.f / 720.f, 1.f / 120.f, 1.f / 24.f,
                                       1.f / 6.f,    0.5f,        1.f,         1.f};
inline constexpr float kExp2Remez[] = {1.534581243e-4f, 1.339993090e-3f, 9.618489072e-3f, 5.550328642e-2f,
                                       2.402264625e-1f, 6.931471825e-1f, 1.f};

// Σ c[i]·x^(N−1−i) by Horner: p ← fma(p, x, c[i]). V: a vector type; fma(a, b, c) and set1(f) its
// operations (the intrinsics of one ISA).
template <class V, size_t N, class Fma, class Set1>
inline V horner(V x, const float (&c)[N], Fma fma, Set1 set1) {
  V p = set1(c[0]);
#pragma GCC unroll 8
  for (size_t i = 1; i < N; ++i) p = fma(p, x, set1(c[i]));
  return p;
}

// The largest of x[0..n) with NaN skipped; −inf when nothing is above −inf (n = 0, or only −inf and
// NaN). Vectorised by `omp simd reduction(max)` over `x > m ? x : m` (GCC 12 leaves std::max's form
// scalar). OpenMP leaves the start of each lane's private maximum to the compiler, "the least
// representable value": GCC starts from −inf, clang from −FLT_MAX, so under clang a row with nothing
// visible came out −FLT_MAX. A result of −FLT_MAX is therefore settled by one scan (it is the answer
// only when some element is −FLT_MAX), and both compilers give the same value for every input.
inline float max_skip_nan(const float* __restrict x, int64_t n) {
  constexpr float lowest = std::numeric_limits<float>::lowest();
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m != lowest) return m;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == lowest) return lowest;
  return -std::numeric_limits<float>::infinity();
}

}  // namespace stretch::ops::simd

#if defined(__AVX512F__)
#include <immintrin.h>

namespace stretch::ops::simd {

inline __m512 fma16(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
inline __m512 set16(float f) { return _mm512_set1_ps(f); }

// exp(x) for x ∈ [−104, 88] (callers clamp below: exp(−104) rounds to 0 already):
// x = n·ln2 + r with n = round(x·log2 e), |r| ≤ ln2/2 (ln2 in two parts, so r is exact to
// ~1e−12), e^r by its Taylor polynomial of degree 7 (truncation r^8/8! ≤ 5.3e−9 relative,
// under a tenth of an ulp), then ·2^n by vscalefps. Measured
// against double exp over every 97th float of [−60, 8] (22 M of them) and of [−104, 0] (with
// the subnormal results): ≤ 2 ulp (tests/ops/test_attention_exp.cpp).
inline __m512 exp_vec16(__m512 x) {
  // The masked forms of roundscale / scalef with every lane set: GCC 12's unmasked ones start
  // from _mm512_undefined_ps() and warn (-Wuninitialized) once inlined.
  const __m512 xl = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_mask_roundscale_ps(xl, 0xFFFF, xl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln2 high part (exact n·hi)
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);    // ln2 − high part
  const __m512 p = horner(r, kExpTaylor, fma16, set16);
  return _mm512_mask_scalef_ps(p, 0xFFFF, p, n);
}

// 2^t for t ∈ [−126, 128) on the lanes of k, 0 on the others: n = round(t), f = t − n ∈ [−½, ½]
// (exact), 2^f by a degree-6 polynomial (Remez, relative error 1.9e−9 on [−½, ½]; with the
// coefficients in float and Horner by FMA ≤ 0.94 ulp), then ·2^n by vscalefps. Lanes outside k
// may hold anything (−inf, NaN): their result is 0. The attention forward's softmax works in
// log2 units (scores pre-multiplied by log2 e), so this is its exponential: no ln 2 reduction.
// Measured against double exp2 (tests/ops/test_attention_exp.cpp): ≤ 1 ulp.
inline __m512 exp2_maskz16(__mmask16 k, __m512 t) {
  const __m512 n = _mm512_mask_roundscale_ps(t, 0xFFFF, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  const __m512 p = horner(f, kExp2Remez, fma16, set16);
  return _mm512_maskz_scalef_ps(k, p, n);
}

// exp(x) for any x ≥ −inf: NaN stays NaN (max returns its second operand, x, then), below −104
// (and −inf) the result is exp(−104), which rounds to 0.
inline __m512 exp_any16(__m512 x) { return exp_vec16(_mm512_mask_max_ps(x, 0xFFFF, _mm512_set1_ps(-104.f), x)); }

// Lanes summed as a fixed tree (halves, quarters, pairs within 128 bits). The masked forms with
// every lane set, as in exp_vec16.
inline float sum_lanes(__m512 acc) {
  acc = _mm512_add_ps(acc, _mm512_mask_shuffle_f32x4(acc, 0xFFFF, acc, acc, 0x4E));
  acc = _mm512_add_ps(acc, _mm512_mask_shuffle_f32x4(acc, 0xFFFF, acc, acc, 0xB1));
  acc = _mm512_add_ps(acc, _mm512_mask_permute_ps(acc, 0xFFFF, acc, 0x4E));
  acc = _mm512_add_ps(acc, _mm512_mask_permute_ps(acc, 0xFFFF, acc, 0xB1));
  return _mm512_cvtss_f32(acc);
}

// The largest lane, by the same tree. max(a, b) returns b when a is NaN: callers pass vectors
// whose NaN lanes were already skipped.
inline float max_lanes(__m512 m) {
  m = _mm512_mask_max_ps(m, 0xFFFF, _mm512_mask_shuffle_f32x4(m, 0xFFFF, m, m, 0x4E), m);
  m = _mm512_mask_max_ps(m, 0xFFFF, _mm512_mask_shuffle_f32x4(m, 0xFFFF, m, m, 0xB1), m);
  m = _mm512_mask_max_ps(m, 0xFFFF, _mm512_mask_permute_ps(m, 0xFFFF, m, 0x4E), m);
  m = _mm512_mask_max_ps(m, 0xFFFF, _mm512_mask_permute_ps(m, 0xFFFF, m, 0xB1), m);
  return _mm512_cvtss_f32(m);
}

// The first min(rest, 16) lanes (none for rest ≤ 0): the mask of a row's next 16 elements.
inline __mmask16 first_lanes(int64_t rest) {
  return rest >= 16 ? __mmask16(0xFFFF) : rest > 0 ? __mmask16((1u << rest) - 1u) : __mmask16(0);
}

}  // namespace stretch::ops::simd

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace stretch::ops::simd {

inline __m256 fma8(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
inline __m256 set8(float f) { return _mm256_set1_ps(f); }

// AVX2 + FMA builds (e.g. Zen 3): the attention kernel's and the cross-entropy's exp.
// exp_vec16's reduction and polynomial in 8 lanes: x = n·ln2 + r, e^r by the degree-7 Taylor
// polynomial p; returns p and sets *n (as floats). Valid for x ∈ [−104, 88].
inline __m256 exp_poly8(__m256 x, __m256* n_out) {
  const __m256 xl = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f));
  const __m256 n = _mm256_round_ps(xl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);  // ln2 high part (exact n·hi)
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r);    // ln2 − high part
  *n_out = n;
  return horner(r, kExpTaylor, fma8, set8);
}

// 2^n for integer n ∈ [−126, 127] from its exponent bits ((n + 127) << 23).
inline __m256 pow2_bits8(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

// exp(x) for x ∈ [−87, 88]: p·2^n with 2^n from its exponent bits instead of vscalefps (over that
// range the results are normal and the product by a power of two is exact, as vscalefps's):
// ≤ 2 ulp (tests/ops/test_attention_exp.cpp). Callers clamp below (exp_row at −60).
inline __m256 exp_vec8(__m256 x) {
  __m256 n;
  const __m256 p = exp_poly8(x, &n);
  return _mm256_mul_ps(p, pow2_bits8(_mm256_cvtps_epi32(n)));
}

// exp(x) for any x (exp_any16's contract, the cross-entropy's exp): NaN stays NaN (max returns its
// second operand, x, then), below −104 (and −inf) the result is exp(−104), which rounds to 0.
// n ∈ [−150, 127] is applied as 2^⌊n/2⌋ · 2^(n − ⌊n/2⌋), both normal: the first product is exact,
// the second rounds once, so subnormal results are rounded as vscalefps rounds them (≤ 2 ulp).
inline __m256 exp_any8(__m256 x) {
  __m256 n;
  const __m256 p = exp_poly8(_mm256_max_ps(_mm256_set1_ps(-104.f), x), &n);
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2_bits8(n1)), pow2_bits8(_mm256_sub_epi32(ni, n1)));
}

// 2^t on the lanes of keep (all bits set), 0 on the others, for t ∈ (kFlush2, 12] on the kept lanes
// (the forward's log2-unit pass: flushed at or below 2^−86.5, t ≤ lazy2): exp2_maskz16's reduction
// and polynomial in 8 lanes, 2^n from its exponent bits (normal over that range, the product exact
// as vscalefps's). Lanes outside keep may hold anything (−inf, NaN): the AND clears them.
inline __m256 exp2_keep8(__m256 keep, __m256 t) {
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  const __m256 p = horner(f, kExp2Remez, fma8, set8);
  return _mm256_and_ps(keep, _mm256_mul_ps(p, pow2_bits8(_mm256_cvtps_epi32(n))));
}

// The largest lane, by the same tree as sum_lanes8. max(a, b) returns b when a is NaN: callers
// pass vectors whose NaN lanes were already skipped.
inline float max_lanes8(__m256 m) {
  __m128 v = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// Lanes summed as a fixed tree (halves, then pairs within 128 bits).
inline float sum_lanes8(__m256 acc) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// The first min(rest, 8) lanes as a load/store mask (all bits set), none for rest ≤ 0.
inline __m256i first_lanes8(int64_t rest) {
  const int k = rest >= 8 ? 8 : rest > 0 ? static_cast<int>(rest) : 0;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace stretch::ops::simd
#endif
