#include "train/signals.h"

#include <csignal>
#include <cstdlib>

namespace stretch::train {
namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_stop(int sig) {
  if (g_signal != 0) std::_Exit(128 + sig);  // second signal: leave now
  g_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
}

int stop_signal() { return g_signal; }
}  // namespace stretch::train
