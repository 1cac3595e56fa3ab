// ops/attention_tile.h — internal to the fused kernel (attention_cpu*.cpp): the register-blocked tile product
// used for every matrix product inside the fused attention kernel.
//   tile_gemm<Init, Layout>(m, n, k, a, lda, b, ldb, c, ldc):
//     C[m, n] (= or +=) A[m, k] · B[k, n]; B and C row-major; A(r, p) is a[r·lda + p]
//     (ALayout::Rows) or a[p·lda + r] (ALayout::Cols, i.e. Aᵀ stored row-major).
//   transpose_block: one kLanes × kLanes block transposed in registers (the packs of Kᵀ, Vᵀ).
// The micro-kernel keeps a kMr × kNr block of C in vector registers (8 × 32 floats = 16 zmm
// with AVX-512, 6 × 16 = 12 ymm with AVX2; a kLanes-wide half block for the columns after the
// last whole block, then an element tail) and streams one row of B per step: GCC's vector
// extension lowers it to FMAs of the target ISA. Measured against dnnl_sgemm on a 64×64×64
// tile it runs at the same speed (docs/BENCHMARKS.md), without a library call per tile.
#pragma once
#include <cstdint>
#include <cstring>
#include <utility>

namespace stretch::ops::attn {

#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
inline constexpr int kMr = 8;
#else
inline constexpr int kLanes = 8;
inline constexpr int kMr = 6;
#endif
static_assert(kMr == 6 || kMr == 8, "tile_gemm dispatches row counts up to 8");
inline constexpr int kNv = 2;                // vectors per micro-kernel row
inline constexpr int kNr = kLanes * kNv;     // columns per micro-kernel block
typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));

enum class ALayout : uint8_t { Rows, Cols };
enum class Init : uint8_t { Zero, Accumulate };

template <ALayout L>
inline float a_at(const float* a, int64_t lda, int r, int p) {
  return L == ALayout::Rows ? a[r * lda + p] : a[p * lda + r];
}

// C rows as unaligned vectors: loads and stores straight to registers (a memcpy into an
// accumulator array kept the array on the stack: 16 stores and 16 loads around every call).
typedef float VecFU __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// NV vectors per row: kNv for whole kNr-column blocks, 1 for a kLanes-column block in a tail.
template <int MR, Init I, ALayout L, int NV = kNv>
inline void micro_full(int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (k <= 0) {  // empty product; below, the loop body runs at least once (no zero-trip path
    if constexpr (I == Init::Zero)  // keeping the accumulators in memory)
      for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<VecFU*>(c + r * ldc + v * kLanes) = VecF{};
    return;
  }
  VecF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      if constexpr (I == Init::Zero) acc[r][v] = VecF{};
      else acc[r][v] = *reinterpret_cast<const VecFU*>(c + r * ldc + v * kLanes);
    }
  int p = 0;
  do {
    VecF bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const VecFU*>(b + p * ldb + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      const float av = a_at<L>(a, lda, r, p);
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  } while (++p < k);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) *reinterpret_cast<VecFU*>(c + r * ldc + v * kLanes) = acc[r][v];
}

// The last n < kLanes columns of a row block.
template <int MR, Init I, ALayout L>
inline void micro_tail(int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  float acc[MR][kNr];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < n; ++j) acc[r][j] = I == Init::Zero ? 0.f : c[r * ldc + j];
  for (int p = 0; p < k; ++p)
    for (int r = 0; r < MR; ++r) {
      const float av = a_at<L>(a, lda, r, p);
#pragma omp simd
      for (int j = 0; j < n; ++j) acc[r][j] += av * b[p * ldb + j];
    }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < n; ++j) c[r * ldc + j] = acc[r][j];
}

template <int MR, Init I, ALayout L>
inline void row_block(int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  int j = 0;
  for (; j + kNr <= n; j += kNr) micro_full<MR, I, L>(k, a, lda, b + j, ldb, c + j, ldc);
  if constexpr (kNv > 1)  // a half block in registers: the element tail is several times slower per column
    for (; j + kLanes <= n; j += kLanes) micro_full<MR, I, L, 1>(k, a, lda, b + j, ldb, c + j, ldc);
  if (j < n) micro_tail<MR, I, L>(n - j, k, a, lda, b + j, ldb, c + j, ldc);
}

template <Init I, ALayout L>
inline void tile_gemm(int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                      int64_t ldc) {
  for (int i = 0; i < m; i += kMr) {
    const float* ai = L == ALayout::Rows ? a + i * lda : a + i;
    float* ci = c + i * ldc;
    switch (m - i < kMr ? m - i : kMr) {
      case 1: row_block<1, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 2: row_block<2, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 3: row_block<3, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 4: row_block<4, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 5: row_block<5, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 6: row_block<6, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
#if defined(__AVX512F__)
      case 7: row_block<7, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
      case 8: row_block<8, I, L>(n, k, ai, lda, b, ldb, ci, ldc); break;
#endif
      default: break;
    }
  }
}

// dst[x·ldd + y] = src[y·lds + x] for x, y < kLanes: one kLanes × kLanes block transposed in
// registers, rows y ≥ rows read as zeros. log2(kLanes) butterfly stages: the stage of stride t
// swaps the off-diagonal t × t blocks of every 2t × 2t block (pairs of rows i, i + t); V is any
// kLanes-element vector type (VecF; 32-bit words for the bf16 packs): only bits move.
template <int T, class V, size_t... L>
inline void swap_blocks(V& a, V& b, std::index_sequence<L...>) {
  const V lo = __builtin_shufflevector(a, b, ((L & T) == 0 ? L : kLanes + L - T)...);
  const V hi = __builtin_shufflevector(a, b, ((L & T) == 0 ? L + T : kLanes + L)...);
  a = lo, b = hi;
}
template <int T, class V>
inline void butterfly(V* r) {
  for (int i = 0; i < kLanes; ++i)
    if ((i & T) == 0) swap_blocks<T>(r[i], r[i + T], std::make_index_sequence<kLanes>{});
}
// r[y][x] ← r[x][y]: a kLanes × kLanes block transposed in registers.
template <class V>
inline void transpose_regs(V* r) {
  butterfly<1>(r);
  butterfly<2>(r);
  butterfly<4>(r);
  if constexpr (kLanes == 16) butterfly<8>(r);
}
inline void transpose_block(float* dst, int64_t ldd, const float* src, int64_t lds, int rows) {
  VecF r[kLanes];
  for (int y = 0; y < kLanes; ++y) r[y] = y < rows ? *reinterpret_cast<const VecFU*>(src + y * lds) : VecF{};
  transpose_regs(r);
  for (int x = 0; x < kLanes; ++x) *reinterpret_cast<VecFU*>(dst + x * ldd) = r[x];
}

}  // namespace stretch::ops::attn
