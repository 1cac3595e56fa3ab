#include "core/signals.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace stretch {
namespace {
constexpr int kStopSignals[] = {SIGINT, SIGTERM};

std::atomic<int> g_signal{0};
std::atomic<bool> g_armed{false};
std::atomic<bool> g_ignored[NSIG] = {};  // disposition SIG_IGN when the process started
sigset_t g_original_mask, g_stop_set;
std::once_flag g_once;

// Unarmed: the default action, as if the signal had never been blocked (it ends the process).
void act_by_default(int sig) {
  if (g_ignored[sig].load()) return;
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_kill(pthread_self(), sig);  // pending on this thread only
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);  // delivered here: the process is killed by sig
  std::_Exit(128 + sig);  // not reached
}

void wait_for_signals() {
  for (;;) {
    int sig = 0;
    if (sigwait(&g_stop_set, &sig) != 0) continue;
    if (!g_armed.load()) {
      act_by_default(sig);
      continue;
    }
    int none = 0;
    if (!g_signal.compare_exchange_strong(none, sig)) std::_Exit(128 + sig);  // second signal
  }
}

extern "C" void restore_mask_in_child() { pthread_sigmask(SIG_SETMASK, &g_original_mask, nullptr); }
}  // namespace

void receive_stop_signals() {
  std::call_once(g_once, [] {
    sigemptyset(&g_stop_set);
    for (int sig : kStopSignals) {
      sigaddset(&g_stop_set, sig);
      struct sigaction old = {};
      sigaction(sig, nullptr, &old);
      g_ignored[sig] = old.sa_handler == SIG_IGN;
    }
    pthread_sigmask(SIG_BLOCK, &g_stop_set, &g_original_mask);
    pthread_atfork(nullptr, nullptr, restore_mask_in_child);
    std::thread(wait_for_signals).detach();
  });
}

void arm_graceful_stop() {
  receive_stop_signals();
  g_armed = true;
}

int stop_signal() { return g_signal.load(); }

const sigset_t& original_signal_mask() { return g_original_mask; }
}  // namespace stretch
