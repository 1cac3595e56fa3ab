// core/threads.h — one place that sets the thread count for OpenMP and the GEMM library.
// Contract: set_num_threads(n) with n > 0 fixes the count; n = 0 keeps what the environment
// says (OMP_NUM_THREADS, else all cores). The GEMM library (oneDNN, OpenMP runtime) shares
// the same OpenMP pool, so there is never oversubscription.
#pragma once

namespace stretch {
void set_num_threads(int n);
int num_threads();
}  // namespace stretch
