// tests/fuzz/fuzz_input.h — what every fuzz target shares: the input written to a file (the
// readers under test take paths, as the binary does), in one directory per process on a tmpfs
// (/dev/shm, else $TMPDIR), removed at exit.
// Contract of a target (tests/fuzz/fuzz_<name>.cpp): LLVMFuzzerTestOneInput feeds the bytes to one
// reader and catches stretch::Error only (the reader's documented way to refuse bad input). Any
// other exception, a sanitizer report, a crash, a hang or a >2 GB allocation is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace stretch::fuzz {

inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    std::string d = std::string(base) + "/stretch-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    static const std::string keep = d;
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(keep, ec); });
    return d;
  }();
  return dir;
}

// Writes bytes[n] to scratch_dir()/name and returns the path.
inline std::string write_input(const std::string& name, const uint8_t* bytes, size_t n) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (n > 0 && std::fwrite(bytes, 1, n, f) != n) std::abort();
  if (std::fclose(f) != 0) std::abort();
  return path;
}

}  // namespace stretch::fuzz
