#include "core/subprocess.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>

#include "core/signals.h"

extern char** environ;

namespace stretch {

int run_shell(const std::string& command_line) {
  posix_spawnattr_t attr;
  if (posix_spawnattr_init(&attr) != 0) return -1;
  posix_spawnattr_setsigmask(&attr, &original_signal_mask());
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string sh = "sh", dash_c = "-c", cmd = command_line;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

}  // namespace stretch
