// core/signals.h — SIGINT and SIGTERM are received on one thread with sigwait, never by a handler.
// Contract:
//  - main() calls receive_stop_signals() first, before any OpenMP, oneDNN or MPI thread exists:
//    it blocks SIGINT and SIGTERM in the calling thread (every later thread inherits the mask)
//    and starts one thread that sigwait()s for them. No signal frame is then ever pushed on a
//    compute thread's stack: oneDNN 2.6's JIT GEMM points the stack pointer into a heap
//    workspace (oneDNN issue #4845, fixed by PR #4855), so a handler run there corrupts the heap.
//  - Unarmed (preprocess, sweep, generate, info): a stop signal acts as it did without
//    this module: the process dies of that signal (a shell sees 128+sig), or nothing happens if
//    the signal was ignored when the process started (e.g. SIGINT of a `cmd &` in a script).
//  - After arm_graceful_stop() (train, eval-lm): the first signal sets stop_signal(); the training
//    loop polls it at update boundaries, saves checkpoint_last.pt and exits 128+sig; eval-lm polls
//    it after each forward pass and prints the partial result, exit 128+sig. A second signal
//    exits at once with 128+sig (std::_Exit; nothing is saved).
//  - SIGHUP, SIGQUIT and the synchronous signals (SIGSEGV, SIGFPE, ...) are left alone: they
//    keep their default action, which runs no code in the process, so they push no frame. The
//    one exception is a run under a finite memory limit (core/memory_limit_crash.h): SIGSEGV,
//    SIGBUS and SIGABRT then print what happened and exit 1 (the process is ending anyway).
//  - Children: the mask is inherited across fork and exec, so spawn through core/subprocess.h
//    (it restores original_signal_mask()); a plain fork() child gets it back by pthread_atfork.
//  - Without receive_stop_signals() (unit tests), arm_graceful_stop() calls it; threads that
//    exist already keep the default action for these signals.
#pragma once
#include <csignal>

namespace stretch {
void receive_stop_signals();
void arm_graceful_stop();
// 0 while running; the signal number once SIGINT or SIGTERM arrived while armed.
int stop_signal();
// The signal mask of the thread that called receive_stop_signals(), before it blocked anything.
const sigset_t& original_signal_mask();
}  // namespace stretch
