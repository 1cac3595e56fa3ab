// ops/gemm_openblas.cpp — which library runs the plain fp32 products (ops/gemm.h: gemm_library),
// and the OpenBLAS route itself (cblas_sgemm of the OpenMP build; Debian's libopenblas-openmp-dev).
//
// OpenBLAS is loaded with dlopen when first chosen, never linked: its load-time constructor
// reserves a 128 MiB buffer per thread, and under an address-space limit that allocation is
// refused and retried forever (measured: `ulimit -v 200 MiB` hangs before main, 1000 MiB trains).
// So a process under a finite memory limit (RLIMIT_AS / RLIMIT_DATA) keeps oneDNN and never loads
// it (tests/train/test_memory_limit.py).
#include <cblas.h>
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/cached_setting.h"
#include "core/error.h"
#include "core/memory_limit_crash.h"
#include "ops/gemm.h"
#include "ops/gemm_openblas.h"

#ifndef STRETCH_OPENBLAS_LIBRARY
#define STRETCH_OPENBLAS_LIBRARY "libopenblas.so.0"
#endif

namespace stretch::ops {
namespace {

CachedSetting<GemmLibrary> g_library;

struct OpenBlasApi {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_get_config) config = nullptr;
  std::string failure;  // why it could not be loaded; empty when loaded
};

// Loads the library once (the first caller; single-threaded at startup: cli/command.cpp).
const OpenBlasApi& api() {
  static OpenBlasApi a;
  static std::once_flag once;
  std::call_once(once, [] {
    if (memory_limited()) {
      a.failure = "this process runs under a memory limit (ulimit -v / -d), where OpenBLAS hangs while it loads";
      return;
    }
    void* h = ::dlopen(STRETCH_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      a.failure = std::string("cannot load ") + STRETCH_OPENBLAS_LIBRARY + ": " + (e ? e : "unknown error");
      return;
    }
    a.sgemm = reinterpret_cast<decltype(a.sgemm)>(::dlsym(h, "cblas_sgemm"));
    a.config = reinterpret_cast<decltype(a.config)>(::dlsym(h, "openblas_get_config"));
    if (!a.sgemm || !a.config) {
      a.sgemm = nullptr;
      a.failure = std::string(STRETCH_OPENBLAS_LIBRARY) + " has no cblas_sgemm / openblas_get_config";
    }
  });
  return a;
}

const OpenBlasApi& require_api(const std::string& why) {
  const OpenBlasApi& a = api();
  if (!a.sgemm)
    throw Error(ErrorKind::Usage, why + ": " + a.failure,
                "unset STRETCH_GEMM (oneDNN is then used), remove the memory limit, or install "
                "libopenblas-openmp-dev (scripts/setup.sh)");
  return a;
}

// Mixed where the CPU has no AVX-512 and OpenBLAS loads (not under a memory limit).
GemmLibrary host_default() {
  if (cpu_has_avx512() || !api().sgemm) return GemmLibrary::OneDnn;
  return GemmLibrary::Mixed;
}

GemmLibrary from_environment() {
  const char* v = std::getenv("STRETCH_GEMM");
  if (!v || !*v) return host_default();
  const std::string s(v);
  if (s == "onednn") return GemmLibrary::OneDnn;
  if (s == "openblas" || s == "mixed") {
    require_api("STRETCH_GEMM=" + s);
    return s == "mixed" ? GemmLibrary::Mixed : GemmLibrary::OpenBlas;
  }
  throw Error(ErrorKind::Usage, "STRETCH_GEMM=" + s + " is not a GEMM library",
              "use STRETCH_GEMM=onednn, mixed or openblas, or unset it for the CPU's default");
}

}  // namespace

GemmLibrary gemm_library() { return g_library.get(from_environment); }

void set_gemm_library(GemmLibrary lib) {
  if (lib != GemmLibrary::OneDnn) require_api(std::string("GEMM library ") + gemm_library_name(lib));
  g_library.set(lib);
}

const char* gemm_library_name(GemmLibrary lib) {
  switch (lib) {
    case GemmLibrary::OneDnn: return "onednn";
    case GemmLibrary::Mixed: return "mixed";
    case GemmLibrary::OpenBlas: return "openblas";
  }
  return "?";
}

bool gemm_on_openblas(const GemmParams& p) {
  const GemmLibrary lib = gemm_library();
  return lib == GemmLibrary::OpenBlas ||
         (lib == GemmLibrary::Mixed && p.trans_a == Trans::Yes && p.trans_b == Trans::No);
}

std::string openblas_description() {
  const OpenBlasApi& a = api();
  return a.sgemm ? std::string(a.config()) : "OpenBLAS not loaded: " + a.failure;
}

bool openblas_sgemm(const GemmParams& p, const float* a, const float* b, float* c, int64_t lda, int64_t ldb,
                    int64_t ldc) {
  // The Debian build has 32-bit integer arguments (blasint = int): larger products stay on oneDNN.
  for (int64_t x : {p.m, p.n, p.k, lda, ldb, ldc})
    if (x > INT_MAX) return false;
  api().sgemm(CblasRowMajor, p.trans_a == Trans::Yes ? CblasTrans : CblasNoTrans,
              p.trans_b == Trans::Yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(p.m),
              static_cast<blasint>(p.n), static_cast<blasint>(p.k), p.alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), p.beta, c, static_cast<blasint>(ldc));
  return true;
}

}  // namespace stretch::ops
