// train/signals.h — SIGINT/SIGTERM become a flag the training loop polls at update boundaries.
#pragma once

namespace stretch::train {
void install_stop_handlers();
// 0 while running; the signal number once SIGINT or SIGTERM arrived.
int stop_signal();
}  // namespace stretch::train
