// ops/linear.h — y = x·Wᵀ + b (PyTorch nn.Linear), the model's matrix products.
// Gradient contract (llm.c's rule): *_backward ACCUMULATES (+=) into dinp, dweight and dbias,
// so tied weights and --update-freq work by construction. Any gradient pointer may be null.
#pragma once
#include <cstdint>

#include "ops/grad_init.h"

namespace stretch::ops {

struct LinearDims {
  int64_t n = 0;             // rows: B·T
  int64_t in_features = 0;   // I
  int64_t out_features = 0;  // O
  // dinp for part of the rows only: the rows are blocks of `block` rows (n a multiple of it) and
  // backward leaves dinp's first `skip` rows of each block as they are (no product, no write): rows
  // whose input gradient nobody reads (a layer's detached memory before its segment). 0: every row.
  int64_t block = 0, skip = 0;
};

// What linear_forward applies to each output after the bias (the FFN's fc1 + ReLU in one op).
// ReLU's backward needs only the output (relu'(x) = [relu(x) > 0]), so a fused fc1 keeps no
// pre-activation: activation_backward(d, d, out, n, Relu, Overwrite) turns dout into dpre in place.
enum class LinearEpilogue : uint8_t { None, Relu };

// Under matmul_precision() == Bf16: packed bf16 copies of inp [N, I] and weight [O, I]
// (ops::round_to_bf16) made once by the caller and read by forward and backward instead of
// rounding the operands again for each of the three GEMMs; null members are rounded per GEMM.
// Backward also rounds dout once for its two GEMMs. Results are identical either way.
// Under bf16_products() == Fp32Fma the caller passes fp32 copies of the operands' bf16 values
// instead (ops::round_to_bf16_values; inp_values / weight_values), and backward rounds dout once
// the same way: the products then run as plain fp32 GEMMs on them, with no widening pass per GEMM.
// (Autograd's linear makes these copies for its forward and again for its backward rather than
// keeping them in between: memory as fp32 training's.) Results are the Fp32Fma ones either way.
// dout_in_place == dout lets backward round dout in its own buffer (the caller reads it no more)
// instead of into a copy: Fp32Fma's values in place, native's packed bf16 numbers in the first half
// of dout's buffer (ops::round_to_bf16_in_place). The vocabulary layer's dout is [N, V], and its copy was
// the peak of a `--bf16` step. dbias sums dout before it is rounded either way.
struct LinearBf16 {
  const uint16_t* inp = nullptr;
  const uint16_t* weight = nullptr;
  const float* inp_values = nullptr;
  const float* weight_values = nullptr;
  float* dout_in_place = nullptr;
};

// out [N, O] = epi(inp [N, I] · weight [O, I]ᵀ + bias [O]) (bias may be null)
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearDims& d,
                    LinearEpilogue epi = LinearEpilogue::None, const LinearBf16& pre = {});
// dinp [N, I] += dout · W (= with dinp_init Overwrite; rows of every block past d.skip only);
// dweight [O, I] += doutᵀ · inp;  dbias [O] += Σ_n dout  (every row)
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, const LinearDims& d, GradInit dinp_init = GradInit::Accumulate,
                     const LinearBf16& pre = {});

// How linear_backward runs its two products (dinp's and dweight's) when both are wanted and
// exactly 2 threads are set (docs/architecture.md, "The two backward products side by side"):
//   Sequential  dinp's product on both threads, then dweight's on both;
//   Concurrent  both at once, each on one thread: a layer's products (a few hundred to a few
//               thousand columns) run at well under twice one thread's rate on two threads, so
//               side by side they finish sooner (Zen 3: small model +3 to +6% per step).
// The default is Concurrent where the CPU has no AVX-512 (where it was measured), Sequential where it
// has (on the one AVX-512 host measured, an Intel Xeon, 1.03× within noise: they keep the schedule
// their numbers were taken with).
// STRETCH_LINEAR_BACKWARD=sequential|concurrent overrides it (read once; another value is a usage
// error). Concurrent gives each product the bits it has with 1 thread; the schedules may differ in
// rounding where a library splits a product differently on 2 threads. Other thread counts: Sequential.
enum class LinearBackwardSchedule : uint8_t { Sequential, Concurrent };
LinearBackwardSchedule linear_backward_schedule();
void set_linear_backward_schedule(LinearBackwardSchedule s);  // tests and benchmarks compare them
const char* linear_backward_schedule_name(LinearBackwardSchedule s);  // "sequential" / "concurrent"

namespace ref {
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearDims& d,
                    LinearEpilogue epi = LinearEpilogue::None);
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, const LinearDims& d);
// float64 instantiations of the same reference, for finite-difference gradient checks.
void linear_forward(double* out, const double* inp, const double* weight, const double* bias, const LinearDims& d);
void linear_backward(double* dinp, double* dweight, double* dbias, const double* dout, const double* inp,
                     const double* weight, const LinearDims& d);
}  // namespace ref

}  // namespace stretch::ops
