// ops/gemm_openblas.cpp — which library runs the plain fp32 products (ops/gemm.h: gemm_library),
// and the OpenBLAS route itself (cblas_sgemm of the OpenMP build; Debian's libopenblas-openmp-dev).
#include <cblas.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "ops/gemm.h"
#include "ops/gemm_openblas.h"

namespace stretch::ops {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_library{kUnset};

GemmLibrary host_default() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return GemmLibrary::OpenBlas;
#endif
  return GemmLibrary::OneDnn;
}

GemmLibrary from_environment() {
  const char* v = std::getenv("STRETCH_GEMM");
  if (!v || !*v) return host_default();
  const std::string s(v);
  if (s == "onednn") return GemmLibrary::OneDnn;
  if (s == "openblas") return GemmLibrary::OpenBlas;
  throw Error(ErrorKind::Usage, "STRETCH_GEMM=" + s + " is not a GEMM library",
              "use STRETCH_GEMM=onednn or STRETCH_GEMM=openblas, or unset it for the CPU's default");
}

}  // namespace

GemmLibrary gemm_library() {
  int v = g_library.load(std::memory_order_relaxed);
  if (v == kUnset) {
    v = static_cast<int>(from_environment());
    int expected = kUnset;
    if (!g_library.compare_exchange_strong(expected, v)) v = expected;
  }
  return static_cast<GemmLibrary>(v);
}

void set_gemm_library(GemmLibrary lib) { g_library.store(static_cast<int>(lib)); }

const char* gemm_library_name(GemmLibrary lib) { return lib == GemmLibrary::OpenBlas ? "openblas" : "onednn"; }

bool openblas_sgemm(const GemmParams& p, const float* a, const float* b, float* c, int64_t lda, int64_t ldb,
                    int64_t ldc) {
  // The Debian build has 32-bit integer arguments (blasint = int): larger products stay on oneDNN.
  for (int64_t x : {p.m, p.n, p.k, lda, ldb, ldc})
    if (x > INT_MAX) return false;
  cblas_sgemm(CblasRowMajor, p.trans_a == Trans::Yes ? CblasTrans : CblasNoTrans,
              p.trans_b == Trans::Yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(p.m),
              static_cast<blasint>(p.n), static_cast<blasint>(p.k), p.alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), p.beta, c, static_cast<blasint>(ldc));
  return true;
}

}  // namespace stretch::ops
