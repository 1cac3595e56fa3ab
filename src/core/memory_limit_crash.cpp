// core/memory_limit_crash.cpp — see memory_limit_crash.h.
#include "core/memory_limit_crash.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

namespace stretch {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGABRT};
constexpr int kCount = sizeof(kSignals) / sizeof(kSignals[0]);
// Prepared before any crash: a handler may only write(2) and _exit(2).
char g_message[kCount][640];
size_t g_length[kCount];
alignas(16) char g_alt_stack[64 * 1024];

void on_crash(int sig) {
  for (int i = 0; i < kCount; ++i)
    if (kSignals[i] == sig) {
      ssize_t ignored = ::write(STDERR_FILENO, g_message[i], g_length[i]);
      (void)ignored;
    }
  ::_exit(1);
}

// The smaller finite limit of RLIMIT_AS and RLIMIT_DATA in bytes, and which one; 0 if none.
unsigned long long finite_limit(const char** which) {
  unsigned long long best = 0;
  const struct {
    int resource;
    const char* name;
  } limits[] = {{RLIMIT_AS, "address space (ulimit -v)"}, {RLIMIT_DATA, "data segment (ulimit -d)"}};
  for (const auto& l : limits) {
    rlimit r{};
    if (::getrlimit(l.resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) continue;
    if (best == 0 || r.rlim_cur < best) {
      best = r.rlim_cur;
      *which = l.name;
    }
  }
  return best;
}

}  // namespace

bool memory_limited() {
  const char* which = "";
  return finite_limit(&which) != 0;
}

void report_crashes_under_memory_limit() {
  const char* which = "";
  const unsigned long long limit = finite_limit(&which);
  if (limit == 0) return;
  const double mib = static_cast<double>(limit) / (1024.0 * 1024.0);
  for (int i = 0; i < kCount; ++i) {
    const int n = std::snprintf(
        g_message[i], sizeof(g_message[i]),
        "stretch: error: crashed (SIG%s) under a memory limit: the %s is limited to %.0f MiB. Most likely an "
        "allocation failed inside oneDNN, which crashes instead of reporting it; checkpoints already saved "
        "are complete, progress since the last save is lost\n"
        "  hint: raise the limit (ulimit -v unlimited, or well above %.0f MiB) or make the run smaller: "
        "--max-tokens / --batch-size / --tokens-per-sample, the model size, --threads\n",
        sigabbrev_np(kSignals[i]) ? sigabbrev_np(kSignals[i]) : "?", which, mib, mib);
    g_length[i] = n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof(g_message[i]) - 1);
  }
  stack_t alt{};
  alt.ss_sp = g_alt_stack;
  alt.ss_size = sizeof(g_alt_stack);
  ::sigaltstack(&alt, nullptr);
  struct sigaction sa{};
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace stretch
