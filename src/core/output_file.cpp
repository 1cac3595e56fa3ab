// core/output_file.cpp — outputs written under a temporary name and renamed (contract in the header).
#include "core/output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/orphans.h"

namespace stretch {

OutputFile::OutputFile(std::string path, std::string what, std::ios::openmode mode)
    : path_(std::move(path)), what_(std::move(what)), tmp_(pid_temporary(path_)) {
  // Temporaries of this same output left by a writer that was killed (kill -9, power loss):
  // exactly "<name>.tmp.<pid>" with the pid of no running process (core/orphans.h).
  const std::filesystem::path target(path_);
  const std::string prefix = target.filename().string() + ".tmp.";
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  remove_dead_orphans(dir, [&prefix](const std::string& name) -> std::optional<pid_t> {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
    return pid_after_suffix_marker(name, ".tmp.");
  });
  errno = 0;
  out_.open(tmp_, mode | std::ios::out);
  if (!out_) {
    const int err = errno;
    fail_io(path_, "cannot write " + what_ + " (creating " + tmp_ + ": " + (err ? std::strerror(err) : "open failed") + ")",
            "check that the directory exists and is writable");
  }
}

OutputFile::~OutputFile() {
  if (committed_) return;
  if (out_.is_open()) out_.close();
  std::remove(tmp_.c_str());
}

void OutputFile::fail(const std::string& what, int err) {
  if (out_.is_open()) out_.close();
  std::remove(tmp_.c_str());
  committed_ = true;  // nothing left to remove
  const std::string reason = err ? std::string(": ") + std::strerror(err) : "";
  fail_io(path_, what + " " + what_ + reason + "; nothing was written there",
          err == ENOSPC || err == EDQUOT || err == 0 ? "free disk space (or a quota) on that filesystem, or write somewhere else"
                                                     : "check the filesystem, or write somewhere else");
}

void OutputFile::check_written() {
  if (!out_) fail("could not write", errno);
}

void OutputFile::commit() {
  errno = 0;
  out_.flush();
  if (!out_) fail("could not write", errno);
  out_.close();
  if (!out_) fail("could not close (flush)", errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("could not rename " + tmp_ + " into place for", errno);
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& what, const std::string& text) {
  OutputFile f(path, what, std::ios::out | std::ios::trunc | std::ios::binary);
  f.stream() << text;
  f.commit();
}

}  // namespace stretch
