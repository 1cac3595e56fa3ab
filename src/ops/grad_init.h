// ops/grad_init.h — how a backward kernel stores an input gradient.
// Accumulate (+=) is the contract of every *_backward kernel (tied weights, --update-freq).
// Overwrite (=) is for a gradient buffer nothing has written yet: autograd then hands the kernel
// an uninitialised buffer instead of zero-filling it first (one memory pass less per op). Kernels
// that take a GradInit say which of their outputs it applies to; the others always accumulate.
#pragma once
#include <cstdint>

namespace stretch::ops {

enum class GradInit : uint8_t { Accumulate, Overwrite };

}  // namespace stretch::ops
