// ops/simd_math.h — vector transcendental functions for the fast CPU paths (internal).
// Contract: `#pragma omp simd` loops that call ::expf / ::erff / ::sinf / ::cosf are vectorised
// into glibc's libmvec variants (_ZGVeN16v_expf on AVX-512, _ZGVdN8v_expf on AVX2; ≤ 4 ulp,
// special values handled as the scalar functions). glibc declares these variants only under
// -ffast-math; we redeclare the same `omp declare simd` clauses here so the rest of the build
// keeps IEEE semantics. Outside glibc/x86-64 the loops stay scalar and still correct.
#pragma once
#include <math.h>

#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP) && !defined(__clang__)
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
float erff(float) noexcept;
}
#define STRETCH_HAVE_LIBMVEC 1
#endif
