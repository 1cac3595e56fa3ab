// train/save_dir.cpp — see save_dir.h.
#include "train/save_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/log.h"
#include "core/orphans.h"

namespace stretch::train {
namespace fs = std::filesystem;

SaveDirLock& SaveDirLock::operator=(SaveDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

SaveDirLock::~SaveDirLock() {
  if (fd_ < 0) return;
  // A clean end empties the pid: a pid found in the file later is that of a killed run.
  if (::ftruncate(fd_, 0) != 0) {
  }
  ::close(fd_);  // releases the flock
}

namespace {

const char* kHint = "choose a writable --save-dir (checkpoints are written there), or pass --no-save";

void check_writable(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail_io(dir, "--save-dir exists and is not a directory", kHint);
  fs::create_directories(dir, ec);
  if (ec) fail_io(dir, "cannot create the --save-dir: " + ec.message(), kHint);
  const std::string probe = (fs::path(dir) / (".stretch-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    fail_io(dir, std::string("--save-dir is not writable (cannot create a file in it: ") + std::strerror(err) + ")",
            kHint);
  }
  ::close(fd);
  if (::unlink(probe.c_str()) != 0) {
    const int err = errno;
    fail_io(dir, std::string("--save-dir is not writable (cannot remove a file in it: ") + std::strerror(err) + ")",
            kHint);
  }
}

std::string read_fd_text(int fd) {
  std::string s;
  char buf[64];
  ssize_t n;
  off_t off = 0;
  while ((n = ::pread(fd, buf, sizeof buf, off)) > 0 && s.size() < 256) s.append(buf, static_cast<size_t>(n)), off += n;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

SaveDirLock take_lock(const std::string& dir) {
  const std::string path = (fs::path(dir) / kSaveDirLockName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    fail_io(path, std::string("cannot open the --save-dir lock file: ") + std::strerror(err), kHint);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? read_fd_text(fd) : std::string();
    ::close(fd);  // not ours: leave the holder's pid in the file
    if (err == EWOULDBLOCK) {
      throw Error(ErrorKind::Input,
                  dir + ": --save-dir is in use by another `stretch train` (" +
                      (holder.empty() ? std::string("pid not yet written") : "pid " + holder) + ", lock " + path + ")",
                  "two runs in one --save-dir would mix their checkpoints: wait for that run to finish (or stop it), "
                  "or give this one another --save-dir");
    }
    fail_io(path, std::string("cannot lock the --save-dir: ") + std::strerror(err), kHint);
  }
  SaveDirLock lock(fd);  // ours now (its destructor empties the file and releases the lock)
  // A pid left in the file is that of a run that died (the kernel released its lock).
  const std::string previous = read_fd_text(fd);
  if (!previous.empty() && previous != std::to_string(::getpid()))
    log_info("took over the --save-dir lock " + path + " of process " + previous +
             ", which is no longer running (it was killed; the kernel released its lock)");
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    fail_io(path, std::string("cannot write the --save-dir lock file: ") + std::strerror(err), kHint);
  }
  return lock;
}

}  // namespace

SaveDirLock prepare_save_dir(const std::string& dir) {
  check_writable(dir);
  SaveDirLock lock = take_lock(dir);
  // Under the lock no other trainer writes here; a checkpoint temporary of a dead pid is an orphan.
  // checkpoint*.pt.tmp.link: what versions before session 29 left when killed while linking a saved
  // checkpoint under another name (no pid in its name; under the lock, never a live run's).
  remove_dead_orphans(dir, [](const std::string& name) -> std::optional<pid_t> {
    if (name.rfind("checkpoint", 0) != 0) return std::nullopt;
    if (name.ends_with(".pt.tmp.link")) return kNoLiveOwner;
    return pid_after_suffix_marker(name, ".pt.tmp.");
  });
  return lock;
}

}  // namespace stretch::train
