// ops/gemm.h — the one GEMM interface of stretch. Everything that multiplies matrices calls
// gemm() or gemm_batched(); the library behind it (oneDNN today, chosen by measurement: see
// docs/architecture.md) can be swapped here without touching callers.
// Row-major: C[M, N] = epi(alpha · op(A) · op(B) + bias + beta · C), op(X) = X or Xᵀ.
//   A is [M, K] (or [K, M] if trans_a), B is [K, N] (or [N, K] if trans_b).
//   bias [N] (optional, added to every row; needs alpha = 1 and beta = 0), epi = ReLU or none.
// Precision Bf16: A and B are rounded to bf16 (round to nearest even) and their products summed
// in fp32; bias, C and the result stay fp32 (mixed precision as torch.autocast does it on CPU).
// Fast path: plain fp32 products on gemm_library() (dnnl_sgemm and/or OpenBLAS's cblas_sgemm);
// oneDNN's matmul primitive (cached per shape) when there is a bias, an epilogue or bf16.
#pragma once
#include <cstdint>
#include <string>

namespace stretch::ops {

enum class Trans : uint8_t { No, Yes };
enum class GemmEpilogue : uint8_t { None, Relu };
enum class GemmPrecision : uint8_t { Fp32, Bf16 };

struct GemmParams {
  Trans trans_a = Trans::No;
  Trans trans_b = Trans::No;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;   // 1.0 accumulates into C
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (the natural leading dimension)
  const float* bias = nullptr;        // [N] or null
  GemmEpilogue epilogue = GemmEpilogue::None;
  GemmPrecision precision = GemmPrecision::Fp32;
  // Under Bf16 only: packed bf16 copies of A and B as stored (natural leading dimension, made by
  // round_to_bf16) that a caller already has; gemm then reads them instead of rounding a / b
  // again (a linear layer rounds its input, weight and output gradient once for its three GEMMs).
  const uint16_t* a16 = nullptr;
  const uint16_t* b16 = nullptr;
};

// rows × cols floats (leading dimension ld, 0 = cols) -> packed bf16 [rows, cols], rounded to
// nearest even (tensor/dtype.h's float_to_bf16, vectorised): what gemm does to A and B under Bf16.
void round_to_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t cols, int64_t ld = 0);
// The same rounding of a packed rows × cols float matrix into the first half of its own buffer:
// afterwards `data` holds the packed bf16 [rows, cols] that round_to_bf16 would have written to a
// copy (and no longer its floats). Row r's bf16 values land at bytes [2·r·cols, ...), where rows
// r / 2 and (r + 1) / 2 kept their floats: row 0 is rounded over itself a 16-lane block at a time,
// then rows [2^k, 2^(k+1)) in parallel, k = 0, 1, ...: a round writes only where the earlier rounds'
// floats were and reads only floats no round has written over (a plain in-order pass would do the
// same on one thread). Returns data as the bf16 matrix.
const uint16_t* round_to_bf16_in_place(float* data, int64_t rows, int64_t cols);

// Fast path (oneDNN, multi-threaded over the OpenMP pool).
void gemm(const GemmParams& p, const float* a, const float* b, float* c);
// Naive triple loop with double accumulation (inputs rounded to bf16 first under Bf16): the
// oracle, kept forever.
void gemm_reference(const GemmParams& p, const float* a, const float* b, float* c);

// `batch` independent GEMMs with element strides between consecutive A, B, C matrices.
struct BatchStrides {
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void gemm_batched(const GemmParams& p, const BatchStrides& s, const float* a, const float* b, float* c);

// Whether this CPU can run Bf16 GEMMs at all: oneDNN 2.x has bf16 matmul kernels only from
// AVX-512 up (avx512_core: bf16 emulated with fp32 FMAs; avx512_core_bf16 / AMX: native), and
// none for AVX2 (e.g. Zen 3). Probed once (creating a small bf16 matmul primitive descriptor),
// then cached. Where it is false, gemm() under Bf16 throws stretch::Error (usage, exit 2) naming
// bf16 and the CPU instead of failing inside oneDNN, and `stretch ... --bf16` fails at startup.
bool bf16_matmul_supported();
// How oneDNN computes bf16 products here, from its effective ISA (ONEDNN_MAX_CPU_ISA caps it):
// None (no bf16 matmul), Emulated (avx512_core / _vnni: bf16 widened to fp32 FMAs, several times
// slower than fp32 products), Dot (avx512_core_bf16: vdpbf16ps, 2x the fp32 rate on Zen 4 / Zen 5
// but 0.5x on an Intel Xeon without AMX) or Amx (avx512_core_amx tiles).
enum class Bf16MatmulKind : uint8_t { None, Emulated, Dot, Amx };
Bf16MatmulKind bf16_matmul_kind();
// One line about this CPU for messages: oneDNN's effective ISA and the bf16-relevant flags,
// e.g. "oneDNN ISA avx2; avx2 yes, avx512f no, avx512_bf16 no, amx_bf16 no".
std::string cpu_isa_summary();
// Whether the CPU has AVX-512 (avx512f): the hosts the defaults of gemm_library() and
// ops::linear_backward_schedule() were measured on differ by it.
bool cpu_has_avx512();
// The hint given with that error.
inline constexpr const char* kBf16Hint =
    "bf16 needs a CPU with AVX-512 (bf16 emulation) or AMX/AVX512_BF16; run without --bf16";

// The library behind plain fp32 products (no bias, no epilogue): oneDNN's dnnl_sgemm, or
// OpenBLAS's cblas_sgemm (its OpenMP build, on the same libgomp pool, so --threads N holds for it).
//   OneDnn   every plain product on oneDNN (the default where the CPU has AVX-512);
//   Mixed    the Aᵀ·B products (the weight gradients, K = the batch's tokens) on OpenBLAS, the rest
//            on oneDNN (the default without AVX-512). Reason (docs/architecture.md, measured on Zen 3):
//            oneDNN 2.6's AVX2 sgemm runs the FFN's and the 512 × 512 weight gradients at 0.3-0.5 of
//            the fp32 peak, OpenBLAS at 0.55-0.8; on the other products they are level or oneDNN leads;
//   OpenBlas every plain product on OpenBLAS (for comparison).
// The environment variable STRETCH_GEMM=onednn|mixed|openblas overrides the default (read once;
// another value is a usage error). Each route is deterministic for a given thread count; the
// libraries' results differ in rounding.
enum class GemmLibrary : uint8_t { OneDnn, Mixed, OpenBlas };
GemmLibrary gemm_library();
// Overrides the default and STRETCH_GEMM (tests and benchmarks compare them).
void set_gemm_library(GemmLibrary lib);
const char* gemm_library_name(GemmLibrary lib);  // "onednn" / "mixed" / "openblas"
// OpenBLAS's openblas_get_config() (for `stretch info`), or why it is not loaded: it is loaded with
// dlopen when first chosen, and never under a memory limit (ops/gemm_openblas.cpp).
std::string openblas_description();

// The precision of the model's matrix products: the linear layers, and the fused attention's
// tile products where ops::attention_bf16_supported() (ops/attention_precision.h; softmax, biases
// and everything else stay fp32). Process-wide, set once by `stretch train/eval-lm --bf16`.
void set_matmul_precision(GemmPrecision p);
GemmPrecision matmul_precision();

// How Bf16 products are computed (process-wide; set by `--bf16` at startup, cli/bf16_speed.h):
//   Native   oneDNN's bf16 matmul (vdpbf16ps, AMX tiles, or oneDNN's own emulation) and the fused
//            attention's bf16 tile products (the default; on AMX tiles where
//            ops::attention_bf16_amx(), else vdpbf16ps);
//   Fp32Fma  the operands rounded to bf16 exactly as under Native, widened back to fp32, and the
//            fp32 product run on them: each product of two bf16 values is exact in fp32 and the
//            sums are fp32, so this is the same rounding contract (only the order of the sums
//            differs); the attention runs its fp32 path, as on CPUs without avx512_bf16. For CPUs
//            whose bf16 products are slower than fp32 ones (an Intel Xeon without AMX: vdpbf16ps
//            at 0.5x the fp32 FMA rate; AVX-512 without avx512_bf16: oneDNN emulates bf16);
//   NativeFp32Attention  oneDNN's bf16 matmul, and the fused attention's fp32 path: for CPUs whose
//            AMX tiles run oneDNN's products (~15x the fp32 FMA rate) but not the attention's bf16
//            tiles (a build without that kernel), which then use vdpbf16ps, slower than fp32 FMAs
//            (an Intel Xeon model 167: 0.5x).
enum class Bf16Products : uint8_t { Native, Fp32Fma, NativeFp32Attention };
void set_bf16_products(Bf16Products p);
Bf16Products bf16_products();
const char* bf16_products_name(Bf16Products p);  // "native" / "fp32" / "native-fp32-attention"
// The inverse of bf16_products_name; false for another name.
bool parse_bf16_products(const std::string& name, Bf16Products* out);
// rows × cols floats (leading dimension ld, 0 = cols) -> rows × cols floats holding the bf16
// values round_to_bf16 gives (nearest even, NaN quieted), widened back to fp32. In place
// (dst == src) where ld = cols.
void round_to_bf16_values(float* dst, const float* src, int64_t rows, int64_t cols, int64_t ld = 0);

}  // namespace stretch::ops
