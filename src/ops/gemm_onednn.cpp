// ops/gemm_onednn.cpp — gemm() on oneDNN: dnnl_sgemm for plain fp32 products (or OpenBLAS where
// gemm_library() says so: ops/gemm_openblas.cpp), the matmul primitive for a bias, a ReLU epilogue or
// bf16 inputs. Matmul primitives are created once per (shape, strides, options) and cached;
// bf16 inputs are converted into pool buffers per call (a memory pass over A and B, small next
// to the 2·M·N·K products).
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <atomic>
#include <map>
#include <mutex>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "ops/cpu_util.h"
#include "ops/gemm.h"
#include "ops/gemm_openblas.h"
#include "tensor/dtype.h"

namespace stretch::ops {
namespace {

int64_t lead(int64_t given, int64_t natural) { return given > 0 ? given : natural; }

GemmPrecision g_precision = GemmPrecision::Fp32;

// The bf16 bits of fp32 bits u: round to nearest even, NaN quieted (tensor/dtype.h's float_to_bf16).
inline uint32_t bf16_bits(uint32_t u) {
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return nan ? ((u >> 16) | 0x40u) : rounded;
}

}  // namespace

void round_to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  if (ld <= 0) ld = cols;
#pragma omp parallel for schedule(static) if (rows * cols > cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* s = reinterpret_cast<const uint32_t*>(src + r * ld);
    uint16_t* d = dst + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<uint16_t>(bf16_bits(s[c]));
  }
}

const uint16_t* round_to_bf16_in_place(float* data, int64_t rows, int64_t cols) {
  uint16_t* out = reinterpret_cast<uint16_t*>(data);
  if (rows <= 0 || cols <= 0) return out;
  // Row 0 over itself: element c goes to bytes [2c, 2c + 2), element c / 2's, already read (each block
  // of lanes is loaded whole before any of it is stored; later blocks store only behind it).
  constexpr int64_t kLanes = 16;
  const uint32_t* first = reinterpret_cast<const uint32_t*>(data);
  for (int64_t c0 = 0; c0 < cols; c0 += kLanes) {
    const int64_t n = std::min(kLanes, cols - c0);
    uint32_t block[kLanes];
    std::memcpy(block, first + c0, static_cast<size_t>(n) * sizeof(uint32_t));
    for (int64_t i = 0; i < n; ++i) out[c0 + i] = static_cast<uint16_t>(bf16_bits(block[i]));
  }
  // Rows [lo, hi) = [2^k, 2^(k+1)): floats at bytes [4·lo·cols, 4·hi·cols), bf16 to [2·lo·cols, 2·hi·cols)
  // = the floats of rows [lo / 2, hi / 2), all rounded by earlier rounds.
  for (int64_t lo = 1; lo < rows; lo *= 2) {
    const int64_t hi = std::min(2 * lo, rows);
#pragma omp parallel for schedule(static) if ((hi - lo) * cols > cpu::kParallelThreshold)
    for (int64_t r = lo; r < hi; ++r) {
      const uint32_t* s = reinterpret_cast<const uint32_t*>(data + r * cols);
      uint16_t* d = out + r * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<uint16_t>(bf16_bits(s[c]));
    }
  }
  return out;
}

void round_to_bf16_values(float* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
  if (ld <= 0) ld = cols;
#pragma omp parallel for schedule(static) if (rows * cols > cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* s = reinterpret_cast<const uint32_t*>(src + r * ld);
    uint32_t* d = reinterpret_cast<uint32_t*>(dst + r * cols);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) d[c] = bf16_bits(s[c]) << 16;
  }
}

namespace {

std::atomic<Bf16Products> g_bf16_products{Bf16Products::Native};

// p's bf16 product as the fp32 product of its operands' bf16 values (Bf16Products::Fp32Fma).
void gemm_bf16_as_fp32(const GemmParams& p, const float* a, const float* b, float* c, int64_t lda, int64_t ldb,
                       int64_t ldc) {
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  const int64_t a_rows = ta ? p.k : p.m, a_cols = ta ? p.m : p.k;
  const int64_t b_rows = tb ? p.n : p.k, b_cols = tb ? p.k : p.n;
  cpu::Scratch a32(a_rows * a_cols), b32(b_rows * b_cols);
  auto widen = [](float* dst, const uint16_t* src, int64_t n) {
    uint32_t* d = reinterpret_cast<uint32_t*>(dst);
#pragma omp parallel for simd schedule(static) if (n > cpu::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(src[i]) << 16;
  };
  if (p.a16) widen(a32.data(), p.a16, a_rows * a_cols);
  else round_to_bf16_values(a32.data(), a, a_rows, a_cols, lda);
  if (p.b16) widen(b32.data(), p.b16, b_rows * b_cols);
  else round_to_bf16_values(b32.data(), b, b_rows, b_cols, ldb);
  GemmParams q = p;
  q.precision = GemmPrecision::Fp32;
  q.a16 = q.b16 = nullptr;
  q.lda = a_cols;
  q.ldb = b_cols;
  q.ldc = ldc;
  gemm(q, a32.data(), b32.data(), c);
}

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
Engine& engine() {
  static Engine* e = new Engine();  // never destroyed (primitives may outlive static order)
  return *e;
}

struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// The thread count is part of the key: oneDNN fixes a primitive's work partitioning when it is
// created, so a primitive made under 1 thread would run 1-way after set_num_threads(2)
// (bench_gemm measured 0.74 of sgemm that way).
using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int64_t, int64_t, int64_t, int, int, int, float, float, int>;

Matmul& matmul_for(const GemmParams& p, int64_t lda, int64_t ldb, int64_t ldc, bool bf16) {
  static std::mutex mutex;
  static std::map<Key, Matmul>* cache = new std::map<Key, Matmul>();
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  // bf16 inputs are packed copies: natural leading dimensions.
  const int64_t la = bf16 ? (ta ? p.m : p.k) : lda, lb = bf16 ? (tb ? p.k : p.n) : ldb;
  const Key key{p.m,   p.n,    p.k, ta, tb, la, lb, ldc, p.bias != nullptr, static_cast<int>(p.epilogue), bf16,
                p.alpha, p.beta, omp_get_max_threads()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  using dt = dnnl::memory::data_type;
  const dt in = bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a_md({p.m, p.k}, in, ta ? dnnl::memory::dims{1, la} : dnnl::memory::dims{la, 1});
  const dnnl::memory::desc b_md({p.k, p.n}, in, tb ? dnnl::memory::dims{1, lb} : dnnl::memory::dims{lb, 1});
  const dnnl::memory::desc c_md({p.m, p.n}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::post_ops po;
  if (p.beta != 0.f) po.append_sum(p.beta);
  if (p.epilogue == GemmEpilogue::Relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  if (p.alpha != 1.f) attr.set_output_scales(0, {p.alpha});
  const dnnl::matmul::desc desc = p.bias ? dnnl::matmul::desc(a_md, b_md, dnnl::memory::desc({1, p.n}, dt::f32, dnnl::memory::dims{p.n, 1}), c_md)
                                         : dnnl::matmul::desc(a_md, b_md, c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, engine().engine);
  return cache->emplace(key, Matmul{pd, dnnl::matmul(pd)}).first->second;
}

void gemm_matmul(const GemmParams& p, const float* a, const float* b, float* c, int64_t lda, int64_t ldb,
                 int64_t ldc) {
  const bool bf16 = p.precision == GemmPrecision::Bf16;
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  Matmul& mm = matmul_for(p, lda, ldb, ldc, bf16);
  const dnnl::matmul::primitive_desc& pd = mm.pd;
  Engine& e = engine();
  void* a_ptr = const_cast<float*>(a);
  void* b_ptr = const_cast<float*>(b);
  const size_t a_n = static_cast<size_t>(p.m * p.k), b_n = static_cast<size_t>(p.k * p.n);
  const bool round_a = bf16 && !p.a16, round_b = bf16 && !p.b16;
  cpu::Scratch a_buf(round_a ? static_cast<int64_t>((a_n + 1) / 2) : 0),
      b_buf(round_b ? static_cast<int64_t>((b_n + 1) / 2) : 0);
  if (bf16) {
    uint16_t* a16 = round_a ? reinterpret_cast<uint16_t*>(a_buf.data()) : const_cast<uint16_t*>(p.a16);
    uint16_t* b16 = round_b ? reinterpret_cast<uint16_t*>(b_buf.data()) : const_cast<uint16_t*>(p.b16);
    if (round_a) round_to_bf16(a16, a, ta ? p.k : p.m, ta ? p.m : p.k, lda);
    if (round_b) round_to_bf16(b16, b, tb ? p.n : p.k, tb ? p.k : p.n, ldb);
    a_ptr = a16;
    b_ptr = b16;
  }
  dnnl::memory a_mem(pd.src_desc(), e.engine, a_ptr), b_mem(pd.weights_desc(), e.engine, b_ptr),
      c_mem(pd.dst_desc(), e.engine, c);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
  if (p.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), e.engine, const_cast<float*>(p.bias)));
  mm.prim.execute(e.stream, args);
  e.stream.wait();
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

}  // namespace

bool bf16_matmul_supported() {
  // Thread-safe one-time probe. The descriptor is what fails on a CPU without bf16 kernels
  // ("could not create a primitive descriptor iterator"); bias, post-ops and shapes do not
  // change the answer (every oneDNN 2.x bf16 matmul implementation requires avx512_core).
  static const bool supported = [] {
    try {
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc a({16, 16}, dt::bf16, dnnl::memory::dims{16, 1});
      const dnnl::memory::desc b({16, 16}, dt::bf16, dnnl::memory::dims{16, 1});
      const dnnl::memory::desc c({16, 16}, dt::f32, dnnl::memory::dims{16, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine().engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return supported;
}

Bf16MatmulKind bf16_matmul_kind() {
  if (!bf16_matmul_supported()) return Bf16MatmulKind::None;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: return Bf16MatmulKind::Amx;
    case dnnl::cpu_isa::avx512_core_bf16: return Bf16MatmulKind::Dot;
    default: return Bf16MatmulKind::Emulated;
  }
}

bool cpu_has_avx512() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

std::string cpu_isa_summary() {
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  std::string s = std::string("oneDNN ISA ") + isa_name(dnnl::get_effective_cpu_isa());
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  s += std::string("; avx2 ") + yn(__builtin_cpu_supports("avx2")) + ", avx512f " + yn(__builtin_cpu_supports("avx512f")) +
       ", avx512_bf16 " + yn(__builtin_cpu_supports("avx512bf16"));
#if !defined(__clang__) || __clang_major__ >= 16  // clang 15 does not know the "amx-bf16" feature string
  s += std::string(", amx_bf16 ") + yn(__builtin_cpu_supports("amx-bf16"));
#endif
#endif
  return s;
}

void set_bf16_products(Bf16Products p) { g_bf16_products.store(p); }
Bf16Products bf16_products() { return g_bf16_products.load(std::memory_order_relaxed); }
const char* bf16_products_name(Bf16Products p) {
  switch (p) {
    case Bf16Products::Native: return "native";
    case Bf16Products::Fp32Fma: return "fp32";
    case Bf16Products::NativeFp32Attention: return "native-fp32-attention";
  }
  return "?";
}
bool parse_bf16_products(const std::string& name, Bf16Products* out) {
  for (const Bf16Products p : {Bf16Products::Native, Bf16Products::Fp32Fma, Bf16Products::NativeFp32Attention})
    if (name == bf16_products_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

void set_matmul_precision(GemmPrecision p) { g_precision = p; }
GemmPrecision matmul_precision() { return g_precision; }

void gemm(const GemmParams& p, const float* a, const float* b, float* c) {
  if (p.m == 0 || p.n == 0) return;
  STRETCH_CHECK(!p.bias || (p.alpha == 1.f && p.beta == 0.f), "gemm: a bias needs alpha = 1 and beta = 0");
  STRETCH_CHECK(p.epilogue == GemmEpilogue::None || p.beta == 0.f, "gemm: an epilogue needs beta = 0");
  const bool ta = p.trans_a == Trans::Yes, tb = p.trans_b == Trans::Yes;
  const int64_t lda = lead(p.lda, ta ? p.m : p.k);
  const int64_t ldb = lead(p.ldb, tb ? p.k : p.n);
  const int64_t ldc = lead(p.ldc, p.n);
  if (p.k == 0) {  // C = epi(bias + beta·C)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        float v = (p.beta == 0.f ? 0.f : p.beta * c[i * ldc + j]) + (p.bias ? p.bias[j] : 0.f);
        c[i * ldc + j] = p.epilogue == GemmEpilogue::Relu && v < 0.f ? 0.f : v;
      }
    return;
  }
  if (p.precision == GemmPrecision::Fp32 && !p.bias && p.epilogue == GemmEpilogue::None) {
    if (gemm_on_openblas(p) && openblas_sgemm(p, a, b, c, lda, ldb, ldc)) return;
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', p.m, p.n, p.k, p.alpha, a, lda, b, ldb, p.beta, c, ldc);
    // Out of memory (a memory limit: tests/train/test_memory_limit.py) is the caller's "out of memory"
    // error, not a failed check that calls itself a bug in stretch.
    if (st == dnnl_out_of_memory) throw std::bad_alloc();
    STRETCH_CHECK(st == dnnl_success, "dnnl_sgemm failed with status " << static_cast<int>(st));
    return;
  }
  const bool bf16 = p.precision == GemmPrecision::Bf16;
  // (Fp32Fma needs no bf16 kernels; `--bf16` is still refused on such CPUs, cli/command.cpp.)
  if (bf16 && bf16_products() == Bf16Products::Fp32Fma) return gemm_bf16_as_fp32(p, a, b, c, lda, ldb, ldc);
  if (bf16 && !bf16_matmul_supported())
    throw Error(ErrorKind::Usage, "bf16 matmul is not supported on this CPU (" + cpu_isa_summary() + ")", kBf16Hint);
  try {
    gemm_matmul(p, a, b, c, lda, ldb, ldc);
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::Internal, std::string("oneDNN matmul failed: ") + e.what(), bf16 ? kBf16Hint : "");
  }
}

void gemm_batched(const GemmParams& p, const BatchStrides& s, const float* a, const float* b, float* c) {
  STRETCH_CHECK(!p.a16 && !p.b16, "gemm_batched: pre-rounded bf16 operands are for single GEMMs");
  for (int64_t i = 0; i < s.batch; ++i) gemm(p, a + i * s.stride_a, b + i * s.stride_b, c + i * s.stride_c);
}

}  // namespace stretch::ops
