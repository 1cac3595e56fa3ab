// tests/data/data_test_util.h — helpers for the data tests: a temporary directory that
// cleans up after itself, writing files, running the stretch binary, and corpus paths.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing.h"

namespace stretch::data::testing {

using stretch::testing::TempDir;
using stretch::testing::read_file;
using stretch::testing::write_file;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Run build/bin/stretch with the given argument string (shell syntax).
inline RunResult run_stretch(const std::string& args) {
  const std::string cmd = std::string(STRETCH_BINARY_DIR) + "/bin/stretch " + args + " 2>&1";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A corpus file under STRETCH_DATA_DIR, or "" if it is not there.
inline std::string corpus(const std::string& rel) {
  const std::string path = std::string(STRETCH_DATA_DIR) + "/" + rel;
  return std::filesystem::is_regular_file(path) ? path : std::string();
}

}  // namespace stretch::data::testing
