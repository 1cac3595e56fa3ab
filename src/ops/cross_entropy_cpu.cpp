// ops/cross_entropy_cpu.cpp — fused softmax cross-entropy, fast path.
// Forward: OpenMP over rows; each row is read once, in chunks that stay in L1: the chunk's max
// (vectorised), a rescale of the running sum when the max grows (online softmax), then Σ exp of
// the chunk. Row sums and the loss reduction in double. The exp: on AVX-512 builds simd::exp_any16
// (ops/simd_math.h, inline, ≤ 2 ulp), on AVX2 + FMA simd::exp_any8 (the same in 8 lanes),
// elsewhere libmvec's expf (≤ 4 ulp) through `omp simd`.
// Backward: OpenMP over rows, dlogits += scale·exp(x − lse) vectorised, then −scale at the target.
// In place (training): forward leaves exp(x − rowmax), or with InplaceForm::Softmax already the
// softmax (one L2-resident pass per row instead of backward's pass over [N, V] from memory).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/cross_entropy.h"
#include "ops/cross_entropy_softmax.h"
#include "ops/simd_math.h"

namespace stretch::ops {
namespace {

constexpr int64_t kChunk = kLseColumnAlign;  // the online softmax's chunk (lse_accumulate's alignment)

// The exp loops of this file. AVX-512: the inline exp, 16 lanes a step, the tail masked, lane
// sums added as a fixed tree; AVX2 + FMA: the same with simd::exp_any8, 8 lanes a step, the tail
// masked; elsewhere the `omp simd` loops over libmvec's expf.
// Σ_v exp(x[v] − m) over [0, n); with Store, also out[v] ← exp(x[v] − m) (out may be x).
template <bool Store>
float exp_sum(const float* x, float* out, int64_t n, float m) {
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t v = 0; v < n; v += 16) {
    const __mmask16 k = simd::first_lanes(n - v);
    const __m512 e = simd::exp_any16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + v), vm));
    if constexpr (Store) _mm512_mask_storeu_ps(out + v, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  return simd::sum_lanes(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) {
    const __m256 e = simd::exp_any8(_mm256_sub_ps(_mm256_loadu_ps(x + v), vm));
    if constexpr (Store) _mm256_storeu_ps(out + v, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (v < n) {  // the last n − v < 8: masked load and store, the other lanes kept out of the sum
    const __m256i k = simd::first_lanes8(n - v);
    const __m256 e = _mm256_and_ps(simd::exp_any8(_mm256_sub_ps(_mm256_maskload_ps(x + v, k), vm)),
                                   _mm256_castsi256_ps(k));
    if constexpr (Store) _mm256_maskstore_ps(out + v, k, e);
    acc = _mm256_add_ps(acc, e);
  }
  return simd::sum_lanes8(acc);
#else
  float cs = 0.f;
#pragma omp simd reduction(+ : cs)
  for (int64_t v = 0; v < n; ++v) {
    const float e = expf(x[v] - m);
    if constexpr (Store) out[v] = e;
    cs += e;
  }
  return cs;
#endif
}

// g[v] (= or +=) scale·exp(x[v] − l) over [0, n); with Acc false g may be x (in place).
template <bool Acc>
void scaled_exp(float* g, const float* x, int64_t n, float l, float scale) {
#if defined(__AVX512F__)
  const __m512 vl = _mm512_set1_ps(l), vs = _mm512_set1_ps(scale);
  for (int64_t v = 0; v < n; v += 16) {
    const __mmask16 k = simd::first_lanes(n - v);
    const __m512 e = _mm512_mul_ps(vs, simd::exp_any16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + v), vl)));
    _mm512_mask_storeu_ps(g + v, k, Acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, g + v), e) : e);
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 vl = _mm256_set1_ps(l), vs = _mm256_set1_ps(scale);
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) {
    const __m256 e = _mm256_mul_ps(vs, simd::exp_any8(_mm256_sub_ps(_mm256_loadu_ps(x + v), vl)));
    _mm256_storeu_ps(g + v, Acc ? _mm256_add_ps(_mm256_loadu_ps(g + v), e) : e);
  }
  if (v < n) {
    const __m256i k = simd::first_lanes8(n - v);
    const __m256 e = _mm256_mul_ps(vs, simd::exp_any8(_mm256_sub_ps(_mm256_maskload_ps(x + v, k), vl)));
    _mm256_maskstore_ps(g + v, k, Acc ? _mm256_add_ps(_mm256_maskload_ps(g + v, k), e) : e);
  }
#else
  if constexpr (Acc) {
#pragma omp simd
    for (int64_t v = 0; v < n; ++v) g[v] += scale * expf(x[v] - l);
  } else {
#pragma omp simd
    for (int64_t v = 0; v < n; ++v) g[v] = scale * expf(x[v] - l);
  }
#endif
}

}  // namespace

void check_cross_entropy_targets(const int32_t* targets, const CrossEntropyDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.v > 0, "cross_entropy dims n=" << d.n << " v=" << d.v);
  for (int64_t n = 0; n < d.n; ++n) {
    const int32_t t = targets[n];
    if (t != d.ignore_index && (t < 0 || t >= d.v)) {
      throw Error(ErrorKind::Input,
                  "cross_entropy: target " + std::to_string(t) + " at offset " + std::to_string(n) +
                      " is outside the vocabulary of " + std::to_string(d.v) + " and is not the ignore index " +
                      std::to_string(d.ignore_index),
                  "the data was binarized with a larger dictionary than the model's output layer; re-run "
                  "preprocess or point --data at the matching dict.txt");
    }
  }
}

namespace {

// The online log-sum-exp over x [0, V) in chunks of kChunk from x[0], continuing (m, s): the
// chunk's max, a rescale of the running sum when the max grows, then Σ exp of the chunk.
void lse_chunks(float& m, double& s, const float* __restrict x, int64_t V) {
  for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
    const int64_t v1 = v0 + kChunk < V ? v0 + kChunk : V;
    const float cm = simd::max_skip_nan(x + v0, v1 - v0);
    if (cm == -std::numeric_limits<float>::infinity()) continue;  // chunk adds exp(−inf) = 0
    if (cm > m) {
      s *= std::exp(static_cast<double>(m) - cm);  // 0 when m = −inf
      m = cm;
    }
    s += exp_sum<false>(x + v0, nullptr, v1 - v0, m);
  }
}

// Log-sum-exp of one row in one pass over memory.
double row_lse(const float* __restrict x, int64_t V) {
  RunningLse r;
  lse_chunks(r.max, r.sum, x, V);
  return r.value();
}

// The summed NLL and the scored-row count -> the result under d.reduction.
CrossEntropyResult reduce_result(double total, int64_t count, const CrossEntropyDims& d) {
  CrossEntropyResult r;
  r.count = count;
  r.loss = d.reduction == Reduction::Mean ? (count ? total / static_cast<double>(count) : 0.0) : total;
  return r;
}

// d(loss)/d(summed NLL): dloss, or dloss / count under Mean (0 when no row is scored).
float grad_scale(float dloss, int64_t count, const CrossEntropyDims& d) {
  if (d.reduction != Reduction::Mean) return dloss;
  return count ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(count)) : 0.f;
}

}  // namespace

void lse_accumulate(RunningLse* rows, const float* block, int64_t n, int64_t width, int64_t ld, int64_t first) {
  STRETCH_CHECK(n >= 0 && width >= 0 && ld >= width && first % kLseColumnAlign == 0,
                "lse_accumulate: " << n << " rows of " << width << " columns (ld " << ld << ") from column " << first
                                   << ", which must be a multiple of " << kLseColumnAlign);
#pragma omp parallel for schedule(static) if (n * width > cpu::kParallelThreshold / 4)
  for (int64_t i = 0; i < n; ++i) lse_chunks(rows[i].max, rows[i].sum, block + i * ld, width);
}

CrossEntropyResult cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                                         const CrossEntropyDims& d) {
  check_cross_entropy_targets(targets, d);
  double total = 0.0;
  int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, count) if (d.n * d.v > cpu::kParallelThreshold / 4)
  for (int64_t n = 0; n < d.n; ++n) {
    const float* x = logits + n * d.v;
    const double l = row_lse(x, d.v);
    if (lse) lse[n] = static_cast<float>(l);
    double loss = 0.0;
    if (targets[n] != d.ignore_index) {
      loss = l - static_cast<double>(x[targets[n]]);
      total += loss;
      count += 1;
    }
    if (losses) losses[n] = static_cast<float>(loss);
  }
  return reduce_result(total, count, d);
}

CrossEntropyResult cross_entropy_forward_inplace(float* x_all, float* inv_sum, float* losses, float* lse,
                                                 const int32_t* targets, const CrossEntropyDims& d, InplaceForm form) {
  check_cross_entropy_targets(targets, d);
  STRETCH_CHECK(form == InplaceForm::Exp || d.reduction == Reduction::Sum,
                "cross_entropy_forward_inplace: the Softmax form needs Reduction::Sum");
  const bool softmax = form == InplaceForm::Softmax;
  const int64_t V = d.v;
  double total = 0.0;
  int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, count) if (d.n * V > cpu::kParallelThreshold / 4)
  for (int64_t n = 0; n < d.n; ++n) {
    float* __restrict x = x_all + n * V;
    const float m = simd::max_skip_nan(x, V);
    const int32_t t = targets[n];
    const double xt = t != d.ignore_index ? static_cast<double>(x[t]) : 0.0;
    double s = 0.0;  // float sums per chunk of kChunk, added in double (as row_lse)
    for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
      const int64_t v1 = v0 + kChunk < V ? v0 + kChunk : V;
      s += exp_sum<true>(x + v0, x + v0, v1 - v0, m);
    }
    const double l = static_cast<double>(m) + std::log(s);
    const float inv = static_cast<float>(1.0 / s);
    inv_sum[n] = inv;
    if (softmax && t != d.ignore_index) {
      // backward's g·f with f = dloss·inv_sum at dloss 1 (1.f·inv = inv exactly), while the row is hot
#pragma omp simd
      for (int64_t v = 0; v < V; ++v) x[v] *= inv;
    }
    if (lse) lse[n] = static_cast<float>(l);
    double loss = 0.0;
    if (t != d.ignore_index) {
      loss = l - xt;
      total += loss;
      count += 1;
    }
    if (losses) losses[n] = static_cast<float>(loss);
  }
  return reduce_result(total, count, d);
}

void cross_entropy_backward_inplace(float* x_all, const float* inv_sum, const int32_t* targets, float dloss,
                                    int64_t count, const CrossEntropyDims& d, InplaceForm form) {
  const float scale = grad_scale(dloss, count, d);
  const int64_t V = d.v;
  if (form == InplaceForm::Softmax) {
    // x holds softmax rows (forward's e·inv_sum) except at ignored rows; at scale 1 only the
    // target entries change.
    // Threads only when rows are swept (a scale to apply, or ignored rows to zero: count < n).
    const bool sweeps = scale != 1.f || count < d.n;
#pragma omp parallel for schedule(static) if (sweeps && d.n * V > cpu::kParallelThreshold / 4)
    for (int64_t n = 0; n < d.n; ++n) {
      float* __restrict g = x_all + n * V;
      const int32_t t = targets[n];
      if (t == d.ignore_index) {
        std::fill(g, g + V, 0.f);
        continue;
      }
      if (scale != 1.f) {
#pragma omp simd
        for (int64_t v = 0; v < V; ++v) g[v] *= scale;
      }
      g[t] -= scale;
    }
    return;
  }
#pragma omp parallel for schedule(static) if (d.n * V > cpu::kParallelThreshold / 4)
  for (int64_t n = 0; n < d.n; ++n) {
    float* __restrict g = x_all + n * V;
    const int32_t t = targets[n];
    if (t == d.ignore_index) {
      std::fill(g, g + V, 0.f);
      continue;
    }
    const float f = scale * inv_sum[n];
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) g[v] *= f;
    g[t] -= scale;
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                            float dloss, int64_t count, const CrossEntropyDims& d, GradInit init) {
  check_cross_entropy_targets(targets, d);
  const float scale = grad_scale(dloss, count, d);
  const int64_t V = d.v;
#pragma omp parallel for schedule(static) if (d.n * V > cpu::kParallelThreshold / 4)
  for (int64_t n = 0; n < d.n; ++n) {
    const int32_t t = targets[n];
    if (init == GradInit::Overwrite) {  // no __restrict: g may alias x (in place)
      const float* x = logits + n * V;
      float* g = dlogits + n * V;
      if (t == d.ignore_index) {
        std::fill(g, g + V, 0.f);
        continue;
      }
      const float l = lse[n];
      scaled_exp<false>(g, x, V, l, scale);
      g[t] -= scale;
      continue;
    }
    if (t == d.ignore_index) continue;
    const float* __restrict x = logits + n * V;
    float* __restrict g = dlogits + n * V;
    const float l = lse[n];
    scaled_exp<true>(g, x, V, l, scale);
    g[t] -= scale;
  }
}

CrossEntropyResult cross_entropy_forward_inplace(float* x, float* inv_sum, float* losses, float* lse,
                                                 const int32_t* targets, const CrossEntropyDims& d) {
  return cross_entropy_forward_inplace(x, inv_sum, losses, lse, targets, d, InplaceForm::Exp);
}

void cross_entropy_backward_inplace(float* x, const float* inv_sum, const int32_t* targets, float dloss,
                                    int64_t count, const CrossEntropyDims& d) {
  cross_entropy_backward_inplace(x, inv_sum, targets, dloss, count, d, InplaceForm::Exp);
}

}  // namespace stretch::ops
