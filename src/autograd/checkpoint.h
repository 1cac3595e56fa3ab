// autograd/checkpoint.h — activation checkpointing (fairseq's --checkpoint-activations): a
// function of one activation recorded as ONE tape entry that keeps only its input; in backward
// the function's forward is run again and back-propagated (docs/architecture.md "Activation
// checkpointing").
// Contract: checkpoint(x, fn) returns fn(x)'s value. Forward: fn runs with recording on, on a
// scratch tape that is dropped when fn returns (its saved activations go back to the pool; x and
// the output's value are what stays). Backward (the one entry): fn(x) again on a nested tape
// from a leaf that shares x's value, seeded with the output's gradient, replayed, and the leaf's
// gradient handed to x (adopted, so x's gradient is the same buffer and sum it would have been).
// The gradients equal those of y = fn(x) recorded directly, bit for bit, when
//   * fn is a deterministic function of x and of what it captures: dropout masks are
//     counter-based (seed, stream), so the same streams give the same masks in the recomputation;
//     state fn reads (e.g. ALiBi's warm-up factor) must not change between forward and backward;
//   * x has no gradient of its own before this entry runs (x is used by fn alone: a decoder
//     block's input), so that adopting the leaf's gradient is the same sum, in the same order.
// Without grad mode, or when nothing in fn needs a gradient, it is fn(x) and nothing is recorded.
// A GradWatch (data parallelism) sees, at the entry's index, every input fn's ops would have
// reported, so a parameter used inside fn is final once this entry has run (grad_ready.h).
#pragma once
#include <cstdint>
#include <functional>

#include "autograd/var.h"

namespace stretch::autograd {

// Whether a model's blocks keep their activations for backward or recompute them there.
enum class Activations : uint8_t { Keep, Recompute };

// y = fn(x), recomputed in backward (see above). x [any shape] -> fn's output.
Var checkpoint(const Var& x, std::function<Var(const Var&)> fn);

}  // namespace stretch::autograd
