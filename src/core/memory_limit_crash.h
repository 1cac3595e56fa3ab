// core/memory_limit_crash.h — a clear error instead of a bare crash when a library fails an
// allocation under a memory limit (issue 17, defect 6).
//
// oneDNN 2.6 (Debian 12) does not survive a failed allocation while it creates a kernel: under
// `ulimit -v` its JIT code generator dereferences the null buffer (SIGSEGV in
// dnnl_primitive_create) or throws std::bad_alloc through a C frame of pthread_once on an OpenMP
// thread (glibc then aborts: "libgcc_s.so.1 must be installed for unwinding to work"). Neither
// reaches stretch's own out-of-memory error (stretch_main.cpp), and neither can be caught.
//
// Contract:
//  - report_crashes_under_memory_limit() is called first in main() (it starts no thread).
//    It does nothing when the address-space and data limits (RLIMIT_AS, RLIMIT_DATA) are both
//    unlimited: a crash then keeps its default action (a core dump where enabled).
//  - With a finite limit it installs handlers for SIGSEGV, SIGBUS and SIGABRT (one-shot, on an
//    alternate stack for the main thread) that write one prepared message naming the signal and the
//    limit, with what to do, and end the process with exit status 1 (no destructors run, no file
//    is written: every checkpoint on disk is still a complete one, core/output_file.h).
//  - The message says "most likely": a crash under a limit is not proven to be an allocation
//    failure, so it names the signal as well.
#pragma once

namespace stretch {
void report_crashes_under_memory_limit();
// Whether RLIMIT_AS or RLIMIT_DATA is finite (ops/gemm_openblas.cpp: OpenBLAS is not loaded then).
bool memory_limited();
}  // namespace stretch
