// tests/tsan/race_canary.cpp — the ThreadSanitizer stage's proof that it can fail (scripts/test.sh
// --tsan expects this program to be reported): the concurrent linear backward's shape (two
// `omp sections`, one thread each, ops/linear_cpu.cpp) with both sections writing one buffer,
// which the real code never does. Built only with STRETCH_TSAN.
#include <cstdio>
#include <vector>

int main() {
  std::vector<float> shared(4096, 0.f);
#pragma omp parallel sections num_threads(2)
  {
#pragma omp section
    for (float& v : shared) v += 1.f;
#pragma omp section
    for (float& v : shared) v += 2.f;
  }
  std::printf("race_canary: %g (3 whichever order; the race is the unordered writes)\n", shared[0]);
  return 0;
}
