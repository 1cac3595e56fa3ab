// ops/linear_cpu.cpp — linear on the one GEMM interface (ops/gemm.h, oneDNN sgemm).
// Forward: one GEMM with the bias (and the fused ReLU) in its epilogue (oneDNN's matmul primitive),
// so neither costs a pass over the output. Products in ops::matmul_precision() (fp32 or bf16).
// Under bf16 the operands may come pre-rounded (LinearBf16) and dout is rounded once for both
// backward GEMMs. Backward: two GEMMs with beta = 1 (accumulate, the += contract), one after the
// other or side by side on one thread each (linear_backward_schedule()), and a thread-count-independent
// column sum for dbias (cpu::reduce_rows).
#include <exception>

#include "core/error.h"
#include "core/threads.h"
#include "ops/cpu_util.h"
#include "ops/gemm.h"
#include "ops/linear.h"

namespace stretch::ops {
namespace {
void check_dims(const LinearDims& d) {
  STRETCH_CHECK(d.n >= 0 && d.in_features >= 0 && d.out_features >= 0,
                "linear dims n=" << d.n << " in=" << d.in_features << " out=" << d.out_features);
  STRETCH_CHECK(d.skip == 0 || (d.block > d.skip && d.skip > 0 && d.n % d.block == 0),
                "linear dims: skip " << d.skip << " rows of blocks of " << d.block << " (n=" << d.n << ")");
}
}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, const LinearDims& d,
                    LinearEpilogue epi, const LinearBf16& pre) {
  check_dims(d);
  const int64_t N = d.n, I = d.in_features, O = d.out_features;
  if (N == 0 || O == 0) return;
  // out [N, O] = epi(inp [N, I] · weight [O, I]ᵀ + bias): bias and ReLU in the GEMM's epilogue.
  const bool values = pre.inp_values && pre.weight_values;  // Fp32Fma's rounded copies: a plain fp32 product
  gemm(GemmParams{.trans_a = Trans::No,
                  .trans_b = Trans::Yes,
                  .m = N,
                  .n = O,
                  .k = I,
                  .bias = bias,
                  .epilogue = epi == LinearEpilogue::Relu ? GemmEpilogue::Relu : GemmEpilogue::None,
                  .precision = values ? GemmPrecision::Fp32 : matmul_precision(),
                  .a16 = values ? nullptr : pre.inp,
                  .b16 = values ? nullptr : pre.weight},
       values ? pre.inp_values : inp, values ? pre.weight_values : weight, out);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, const LinearDims& d, GradInit dinp_init, const LinearBf16& pre) {
  check_dims(d);
  const int64_t N = d.n, I = d.in_features, O = d.out_features;
  // bf16: dout [N, O] rounded once for both GEMMs (it is A, as stored, in each): packed bf16, or
  // under Fp32Fma with the operands' values at hand, fp32 values whose products run as fp32 GEMMs.
  // With pre.dout_in_place == dout, in dout's own buffer (no [N, O] copy): the values in place, or the
  // packed bf16 numbers in its first half (round_to_bf16_in_place).
  const bool round_dout = matmul_precision() == GemmPrecision::Bf16 && dinp && dweight && N > 0 && O > 0 && I > 0;
  const bool values = round_dout && pre.inp_values && pre.weight_values;
  const bool in_place = round_dout && pre.dout_in_place == dout;
  // dbias [O] += Σ_n dout, of dout as given (before any rounding in place).
  if (dbias && N > 0 && O > 0) {
    cpu::reduce_rows(dbias, N, O, [&](int64_t n, float* acc) {
      const float* row = dout + n * O;
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) acc[o] += row[o];
    });
  }
  cpu::Scratch dout_buf(round_dout && !in_place ? (values ? N * O : (N * O + 1) / 2) : 0);
  const uint16_t* dout16 = nullptr;
  const float* dout_a = dout;  // A of both products
  if (values) {
    float* rounded = in_place ? pre.dout_in_place : dout_buf.data();
    round_to_bf16_values(rounded, dout, N, O);
    dout_a = rounded;
    inp = pre.inp_values;
    weight = pre.weight_values;
  } else if (round_dout && in_place) {
    dout16 = round_to_bf16_in_place(pre.dout_in_place, N, O);
  } else if (round_dout) {
    round_to_bf16(reinterpret_cast<uint16_t*>(dout_buf.data()), dout, N, O);
    dout16 = reinterpret_cast<const uint16_t*>(dout_buf.data());
  }
  const GemmPrecision precision = values ? GemmPrecision::Fp32 : matmul_precision();
  const uint16_t* inp16 = values ? nullptr : pre.inp;
  const uint16_t* weight16 = values ? nullptr : pre.weight;
  auto dinp_products = [&] {
    if (!(dinp && N > 0 && I > 0)) return;
    // dinp [N, I] (+)= dout [N, O] · weight [O, I]   (beta 0 overwrites; O = 0 then writes zeros);
    // with d.skip, one GEMM per block over its last block − skip rows.
    const float beta = dinp_init == GradInit::Accumulate ? 1.f : 0.f;
    const int64_t block = d.skip > 0 ? d.block : N, skip = d.skip;
    for (int64_t r0 = 0; r0 < N; r0 += block) {
      const int64_t first = r0 + skip;
      gemm(GemmParams{.trans_a = Trans::No, .trans_b = Trans::No, .m = block - skip, .n = I, .k = O, .alpha = 1.f,
                      .beta = beta, .precision = precision,
                      .a16 = dout16 ? dout16 + first * O : nullptr, .b16 = weight16},
           dout_a + first * O, weight, dinp + first * I);
    }
  };
  auto dweight_product = [&] {
    if (!(dweight && O > 0 && I > 0)) return;
    // dweight [O, I] += dout [N, O]ᵀ · inp [N, I]
    gemm(GemmParams{.trans_a = Trans::Yes, .trans_b = Trans::No, .m = O, .n = I, .k = N, .alpha = 1.f, .beta = 1.f,
                    .precision = precision, .a16 = dout16, .b16 = inp16},
         dout_a, inp, dweight);
  };
  // Concurrent: one thread each (inside the parallel region oneDNN and OpenBLAS run single-threaded);
  // an error of either product is rethrown after both (an exception may not leave an OpenMP region).
  if (dinp && dweight && num_threads() == 2 && linear_backward_schedule() == LinearBackwardSchedule::Concurrent) {
    std::exception_ptr failed[2];
    auto run = [&failed](int i, const auto& products) {
      try {
        products();
      } catch (...) {
        failed[i] = std::current_exception();
      }
    };
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
      run(0, dinp_products);
#pragma omp section
      run(1, dweight_product);
    }
    for (const std::exception_ptr& e : failed)
      if (e) std::rethrow_exception(e);
  } else {
    dinp_products();
    dweight_product();
  }
}

}  // namespace stretch::ops
