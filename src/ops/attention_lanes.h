// ops/attention_lanes.h — internal to the fused kernel (attention_cpu*.cpp): the vector the forward's
// log2-unit row pass (attention_exp.h, exp2_row_lazy) works on, and the few operations the bias
// evaluators' bias2 (attention_bias.h) build their lanes with, written once for both ISAs (a row's
// lane masks: simd::first_lanes / first_lanes8 in simd_math.h):
//   AVX-512:      Lanes = __m512, LaneMask = __mmask16 (kRowLanes 16: a 64-key row in 4 vectors);
//   AVX2 + FMA:   Lanes = __m256, LaneMask = __m256i with every bit of a lane set (kRowLanes 8:
//                 8 vectors).
// STRETCH_ATTN_LOG2 is 1 where one of them applies (the forward's softmax then runs in log2
// units), 0 elsewhere (natural units, attn::exp_row_lazy over finished scores).
#pragma once
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define STRETCH_ATTN_LOG2 1
#else
#define STRETCH_ATTN_LOG2 0
#endif

namespace stretch::ops::attn {

#if defined(__AVX512F__)
using Lanes = __m512;
using LaneMask = __mmask16;
inline constexpr int kRowLanes = 16;

inline Lanes lanes_zero() { return _mm512_setzero_ps(); }
inline Lanes lanes_set1(float x) { return _mm512_set1_ps(x); }
inline Lanes lanes_mul(Lanes a, Lanes b) { return _mm512_mul_ps(a, b); }
inline Lanes lanes_abs(Lanes a) { return _mm512_abs_ps(a); }
// p[0..16) on the lanes of k, 0 elsewhere (nothing read outside k).
inline Lanes lanes_load(LaneMask k, const float* p) { return _mm512_maskz_loadu_ps(k, p); }
// rel + lane, as floats (exact below 2^24). (The masked conversion with every lane set: GCC 12's
// unmasked one warns -Wmaybe-uninitialized.)
inline Lanes rel_lanes(int32_t rel) {
  return _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_add_epi32(_mm512_set1_epi32(rel),
                                             _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
}
// p[15], p[14], …, p[0]: a run of 16 floats read backwards (the relative-key band's entries).
inline Lanes lanes_load_reversed(const float* p) {
  const __m512 run = _mm512_loadu_ps(p);
  return __builtin_shufflevector(run, run, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}
inline Lanes lanes_fmadd(Lanes a, Lanes b, Lanes c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
using Lanes = __m256;
using LaneMask = __m256i;
inline constexpr int kRowLanes = 8;

inline Lanes lanes_zero() { return _mm256_setzero_ps(); }
inline Lanes lanes_set1(float x) { return _mm256_set1_ps(x); }
inline Lanes lanes_mul(Lanes a, Lanes b) { return _mm256_mul_ps(a, b); }
inline Lanes lanes_abs(Lanes a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
inline Lanes lanes_load(LaneMask k, const float* p) { return _mm256_maskload_ps(p, k); }
inline Lanes rel_lanes(int32_t rel) {
  return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32(rel), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
inline Lanes lanes_load_reversed(const float* p) {
  return _mm256_permutevar8x32_ps(_mm256_loadu_ps(p), _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
}
inline Lanes lanes_fmadd(Lanes a, Lanes b, Lanes c) { return _mm256_fmadd_ps(a, b, c); }
#endif

}  // namespace stretch::ops::attn
