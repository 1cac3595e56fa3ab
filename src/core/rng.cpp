#include "core/rng.h"

#include <cmath>

#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
// GCC 12's own avx512fintrin.h initialises _mm512_undefined_epi32() from itself, which
// -Wuninitialized reports at every inlined use (GCC bug 105593, fixed in GCC 13): not ours.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif
#include <immintrin.h>
#endif

namespace stretch {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += W0; k1 += W1;
  }
  return {c0, c1, c2, c3};
}

namespace {

#if defined(__AVX512F__)
// The vector operations of the Philox rounds below, 16 lanes (AVX-512).
struct Lanes16 {
  using V = __m512i;
  static constexpr int kN = 16;
  static V load(const uint32_t* p) { return _mm512_load_si512(p); }
  static V set1(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm512_xor_si512(_mm512_xor_si512(a, b), c); }
  // hi and lo 32 bits of the 16 products a[l]·m (vpmuludq on even and odd lanes).
  static void mul_hi_lo(V a, V m, V& hi, V& lo) {
    const V even = _mm512_mul_epu32(a, m);                         // lanes 0, 2, ... as 64-bit
    const V odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);  // lanes 1, 3, ...
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  }
};
#elif defined(__AVX2__)
// The same, 8 lanes (AVX2).
struct Lanes8 {
  using V = __m256i;
  static constexpr int kN = 8;
  static V load(const uint32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static V set1(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void mul_hi_lo(V a, V m, V& hi, V& lo) {
    const V even = _mm256_mul_epu32(a, m);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  }
};
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
// Philox-4x32-10 of L::kN counters (lo0 + l, c2_init, c3_init), l < kN, in registers: word w of
// counter l ends in lane l of c[w] (the scalar philox4x32's rounds, one lane per counter).
template <class L>
inline void philox_lanes(uint64_t key, uint32_t c2_init, uint32_t c3_init, uint64_t lo0, typename L::V c[4]) {
  using V = typename L::V;
  alignas(64) uint32_t lo[L::kN], hi[L::kN];
  for (int l = 0; l < L::kN; ++l) {
    const uint64_t ctr = lo0 + static_cast<uint64_t>(l);
    lo[l] = static_cast<uint32_t>(ctr);
    hi[l] = static_cast<uint32_t>(ctr >> 32);
  }
  c[0] = L::load(lo), c[1] = L::load(hi), c[2] = L::set1(c2_init), c[3] = L::set1(c3_init);
  const V m0 = L::set1(0xD2511F53u), m1 = L::set1(0xCD9E8D57u);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    V hi0, lo0v, hi1, lo1v;
    L::mul_hi_lo(c[0], m0, hi0, lo0v);
    L::mul_hi_lo(c[2], m1, hi1, lo1v);
    const V n0 = L::xor3(hi1, c[1], L::set1(k0));
    const V n2 = L::xor3(hi0, c[3], L::set1(k1));
    c[0] = n0;
    c[1] = lo1v;
    c[2] = n2;
    c[3] = lo0v;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
#endif

#if defined(__AVX512F__)
// 16 counters lo0 .. lo0+15, written as [16, 4]: out[4l + w] = word w of counter l.
inline void philox16(uint64_t key, uint32_t c2_init, uint32_t c3_init, uint64_t lo0, uint32_t* out) {
  __m512i c[4];
  philox_lanes<Lanes16>(key, c2_init, c3_init, lo0, c);
  alignas(64) uint32_t w[4][16];
  for (int j = 0; j < 4; ++j) _mm512_store_si512(w[j], c[j]);
  for (int l = 0; l < 16; ++l)
    for (int j = 0; j < 4; ++j) out[4 * l + j] = w[j][l];
}
#elif defined(__AVX2__)
// 8 counters lo0 .. lo0+7, the [4, 8] words transposed to [8, 4] in registers (out[4l + w] = c_w[l]).
inline void philox8(uint64_t key, uint32_t c2_init, uint32_t c3_init, uint64_t lo0, uint32_t* out) {
  __m256i c[4];
  philox_lanes<Lanes8>(key, c2_init, c3_init, lo0, c);
  // 4 × 4 transposes within each 128-bit half: u_r holds lane r's words (low half) and lane r + 4's
  // (high half); then the halves are regrouped as lanes (0, 1), (2, 3), (4, 5), (6, 7).
  const __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]), t1 = _mm256_unpacklo_epi32(c[2], c[3]);
  const __m256i t2 = _mm256_unpackhi_epi32(c[0], c[1]), t3 = _mm256_unpackhi_epi32(c[2], c[3]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t1), u1 = _mm256_unpackhi_epi64(t0, t1);
  const __m256i u2 = _mm256_unpacklo_epi64(t2, t3), u3 = _mm256_unpackhi_epi64(t2, t3);
  __m256i* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(u0, u1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
}
#endif

}  // namespace

void philox4x32_blocks(uint64_t key, uint64_t counter_hi, uint64_t counter_lo0, int64_t n, uint32_t* out) {
  [[maybe_unused]] constexpr int kLanes = 16;  // AVX-512 and the generic form (AVX2: 8)
  const uint32_t c2_init = static_cast<uint32_t>(counter_hi), c3_init = static_cast<uint32_t>(counter_hi >> 32);
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + kLanes <= n; i += kLanes) philox16(key, c2_init, c3_init, counter_lo0 + static_cast<uint64_t>(i), out + i * 4);
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) philox8(key, c2_init, c3_init, counter_lo0 + static_cast<uint64_t>(i), out + i * 4);
#else
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (; i + kLanes <= n; i += kLanes) {
    alignas(64) uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t ctr = counter_lo0 + static_cast<uint64_t>(i + l);
      c0[l] = static_cast<uint32_t>(ctr);
      c1[l] = static_cast<uint32_t>(ctr >> 32);
      c2[l] = c2_init;
      c3[l] = c3_init;
    }
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(M0) * c0[l];
        const uint64_t p1 = static_cast<uint64_t>(M1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = static_cast<uint32_t>(p1);
        c3[l] = static_cast<uint32_t>(p0);
        c0[l] = n0;
        c2[l] = n2;
      }
      k0 += W0;
      k1 += W1;
    }
    uint32_t* o = out + i * 4;
    for (int l = 0; l < kLanes; ++l) {
      o[4 * l + 0] = c0[l];
      o[4 * l + 1] = c1[l];
      o[4 * l + 2] = c2[l];
      o[4 * l + 3] = c3[l];
    }
  }
#endif
  for (; i < n; ++i) {
    const auto r = philox4x32(key, counter_hi, counter_lo0 + static_cast<uint64_t>(i));
    for (int j = 0; j < 4; ++j) out[i * 4 + j] = r[j];
  }
}

uint32_t Rng::next_u32() {
  uint64_t block = offset_ >> 2;
  auto r = philox4x32(seed_, stream_, block);
  uint32_t v = r[offset_ & 3];
  ++offset_;
  return v;
}

float Rng::normal(float mean, float std) {
  // Box-Muller on two uniforms in (0, 1].
  float u1 = 1.0f - uniform();
  float u2 = uniform();
  float r = std::sqrt(-2.0f * std::log(u1));
  return mean + std * r * std::cos(6.283185307179586f * u2);
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do { x = next_u64(); } while (x >= limit);
  return x % n;
}

}  // namespace stretch
