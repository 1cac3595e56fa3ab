// core/orphans.h — temporary files and directories of processes that died (kill -9, power loss)
// before they could remove them (issue 17, defect 7).
// Contract: a writer names each temporary after its pid (checkpoint.pt.tmp.<pid>,
// .<destdir>.tmp-<pid>-XXXXXX); the next run removes the ones whose pid is no longer running.
// A file whose pid is alive (another process, or a new process that reused the pid) is never
// removed; neither is this process's own.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>

namespace stretch {

// True if a process with this pid exists (kill(pid, 0) succeeds or fails with EPERM).
bool pid_alive(pid_t pid);

// Removes (recursively) every entry of `dir` for which `pid_of(file name)` gives the pid of a
// process that is not alive, or kNoLiveOwner, logging each; returns how many were removed. An entry
// that cannot be removed is reported as a warning and kept. A missing `dir` removes nothing.
// kNoLiveOwner: a name that no running process can be writing (the caller knows, e.g. under a lock:
// an older version's temporary that carried no pid).
inline constexpr pid_t kNoLiveOwner = -1;
int remove_dead_orphans(const std::string& dir, const std::function<std::optional<pid_t>(const std::string&)>& pid_of);

// The name this process writes `path` under before renaming it over `path`: `path`.tmp.<pid>, the
// form that pid_after_suffix_marker(name, ".tmp.") reads back once the pid is dead.
std::string pid_temporary(const std::string& path);

// The pid in a name ending in "<marker><digits>" (e.g. marker ".tmp." for checkpoint_last.pt.tmp.123).
std::optional<pid_t> pid_after_suffix_marker(const std::string& name, const std::string& marker);

}  // namespace stretch
