// ops/attention_precision.h — which precision the fused attention kernel (ops/attention.h) runs in.
//
// Under ops::matmul_precision() == Bf16 and attention_bf16_supported(), the kernel's tile
// products (Q·Kᵀ, P·V and the backward's five) take bf16 operands with fp32 accumulation;
// scores, biases, softmax, the online-softmax state, outputs and gradients stay fp32. Calls with
// the relative-key term or the soft span mask run fp32 whatever the precision. Rounding contract
// and tolerances: docs/architecture.md, "bf16 attention".
#pragma once

namespace stretch::ops {

// Whether the fused kernel has its bf16 path here: built for a target with avx512_bf16 (the
// default -march=native build on such a host) and running on a CPU that has it. Where it is
// false, attention runs fp32 under bf16 matmul precision too (e.g. AVX2 hosts).
bool attention_bf16_supported();

// Whether that path's tile products run on the AMX tiles (tdpbf16ps; ops/attention_tile_amx.h):
// attention_bf16_supported(), a CPU with amx_bf16 and amx_tile, and Linux's grant of the tiles.
// Elsewhere they use vdpbf16ps, which on an Intel Xeon with AMX runs at half the fp32 FMA rate.
bool attention_bf16_amx();

}  // namespace stretch::ops
