// core/orphans.cpp — see orphans.h.
#include "core/orphans.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/log.h"

namespace stretch {

bool pid_alive(pid_t pid) {
  if (pid <= 0) return true;  // not a process id: treat as alive (never remove on a guess)
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

std::string pid_temporary(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

std::optional<pid_t> pid_after_suffix_marker(const std::string& name, const std::string& marker) {
  const size_t at = name.rfind(marker);
  if (at == std::string::npos) return std::nullopt;
  const std::string digits = name.substr(at + marker.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return static_cast<pid_t>(std::stol(digits));
}

int remove_dead_orphans(const std::string& dir, const std::function<std::optional<pid_t>(const std::string&)>& pid_of) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return 0;
  std::vector<std::pair<fs::path, pid_t>> dead;  // collected first: no removal while iterating
  const pid_t self = ::getpid();
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::optional<pid_t> pid = pid_of(it->path().filename().string());
    if (pid && (*pid == kNoLiveOwner || (*pid != self && !pid_alive(*pid)))) dead.emplace_back(it->path(), *pid);
  }
  int removed = 0;
  for (const auto& [path, pid] : dead) {
    const std::string by = pid == kNoLiveOwner ? "a process" : "process " + std::to_string(pid);
    std::error_code rm;
    fs::remove_all(path, rm);
    if (rm) {
      log_warning("could not remove " + path.string() + " (left by " + by + ", which is no longer running): " +
                  rm.message());
      continue;
    }
    log_info("removed " + path.string() + ", left by " + by + " (no longer running: it was killed while writing)");
    ++removed;
  }
  return removed;
}

}  // namespace stretch
