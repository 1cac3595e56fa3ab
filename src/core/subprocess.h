// core/subprocess.h — run a shell command line as std::system() does, but with the signal mask
// the process started with (core/signals.h blocks SIGINT/SIGTERM in every thread; a child would
// inherit that across exec, and e.g. gnuplot would then ignore Ctrl-C).
// Returns the wait status as std::system() does (0: the command exited 0), or -1 when
// /bin/sh could not be started. Unlike std::system(), SIGINT is not ignored while waiting: a
// Ctrl-C reaches the child and this process alike.
#pragma once
#include <string>

namespace stretch {
int run_shell(const std::string& command_line);
}  // namespace stretch
