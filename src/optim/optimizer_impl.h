// optim/optimizer_impl.h — internal to the optim layer: the concrete optimizers' factories
// and the one element loop they share. Not for use outside src/optim/.
#pragma once
#include <cstdint>
#include <memory>

#include "optim/optimizer.h"

namespace stretch::optim::detail {

// Below this many elements a parameter is updated by one thread (OpenMP start-up costs more
// than the loop). Element updates are independent, so the result never depends on it.
inline constexpr int64_t kParallelMinElements = 1 << 15;

// f(i) for i in [0, n), OpenMP-parallel and vectorised. f must capture BY VALUE ([=]): each
// thread works on its own copy, so the captured pointers and scalars are locals the compiler
// can keep in registers (a by-reference closure blocks vectorisation).
template <class F>
inline void for_each_element(int64_t n, const F& f) {
  if (n < kParallelMinElements) {
    F local = f;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) local(i);
    return;
  }
#pragma omp parallel
  {
    F local = f;
#pragma omp for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) local(i);
  }
}

std::unique_ptr<Optimizer> make_nag(const OptimizerConfig& config);
std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& config);
std::unique_ptr<Optimizer> make_adam(const OptimizerConfig& config);   // adam and adamw
std::unique_ptr<Optimizer> make_adagrad(const OptimizerConfig& config);  // both adagrads
std::unique_ptr<Optimizer> make_adafactor(const OptimizerConfig& config);

}  // namespace stretch::optim::detail
