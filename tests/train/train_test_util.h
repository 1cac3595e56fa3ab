// tests/train/train_test_util.h — helpers for the end-to-end `stretch train` tests: a
// self-removing temporary directory, a small synthetic data-bin made by `stretch preprocess`,
// running build/bin/stretch with stdout and stderr captured separately (fork/exec, so a test
// can signal the child), and parsing JSON log lines.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "testing.h"

namespace stretch::train::testing {

using stretch::testing::TempDir;
using stretch::testing::read_file;
using stretch::testing::write_file;

inline std::string stretch_binary() { return std::string(STRETCH_BINARY_DIR) + "/bin/stretch"; }

struct RunResult {
  int exit_code = -1;  // 128 + signal when the child died of a signal
  std::string out, err;
};

// A running `stretch` child with stdout and stderr on pipes.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    int out[2], err[2];
    if (::pipe(out) != 0 || ::pipe(err) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::close(out[0]), ::close(out[1]), ::close(err[0]), ::close(err[1]);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<std::string> argv_s = {stretch_binary()};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]), ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads until stderr contains `needle` or the child closes its pipes; true if found.
  bool wait_for_stderr(const std::string& needle) {
    while (result_.err.find(needle) == std::string::npos)
      if (!pump()) return result_.err.find(needle) != std::string::npos;
    return true;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  // Drains both pipes and reaps the child.
  RunResult wait() {
    while (pump()) {
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    return result_;
  }

 private:
  // One poll round; false once both pipes are closed.
  bool pump() {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int open_fds = (out_fd_ >= 0) + (err_fd_ >= 0);
    if (open_fds == 0) return false;
    if (::poll(fds, 2, 1000) < 0) return true;
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out_fd_ : err_fd_;
      if (fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) (i == 0 ? result_.out : result_.err).append(buf, static_cast<size_t>(n));
      else ::close(fd), fd = -1;
    }
    return true;
  }
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool reaped_ = false;
  RunResult result_;
};

inline RunResult run_stretch(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  Child c(args, env);
  return c.wait();
}

// A deterministic synthetic corpus: `lines` lines of 4..12 words over a 40-word vocabulary,
// with enough structure (each word mostly followed by one of two successors) for the loss
// to fall quickly.
inline std::string synthetic_text(int lines, uint32_t seed) {
  std::ostringstream os;
  uint32_t s = seed * 2654435761u + 1;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  };
  for (int l = 0; l < lines; ++l) {
    const int n = 4 + static_cast<int>(next() % 9);
    uint32_t w = next() % 40;
    for (int i = 0; i < n; ++i) {
      os << (i ? " " : "") << "w" << w;
      w = (next() % 4 == 0) ? next() % 40 : (w * 7 + 3 + (next() % 2)) % 40;
    }
    os << "\n";
  }
  return os.str();
}

// Writes train/valid/test texts into `dir` and binarizes them into dir/data-bin.
inline std::string make_data_bin(const TempDir& dir, int train_lines = 100) {
  write_file(dir / "train.txt", synthetic_text(train_lines, 1));
  write_file(dir / "valid.txt", synthetic_text(20, 2));
  write_file(dir / "test.txt", synthetic_text(20, 3));
  const std::string dest = dir / "data-bin";
  const RunResult r = run_stretch({"preprocess", "--only-source", "--trainpref", dir / "train.txt", "--validpref",
                                   dir / "valid.txt", "--testpref", dir / "test.txt", "--destdir", dest});
  if (r.exit_code != 0) {
    std::fprintf(stderr, "preprocess failed: %s\n%s\n", r.out.c_str(), r.err.c_str());
    std::abort();
  }
  return dest;
}

// The JSON records of a --log-format json log on stdout, read as fairseq's logs are read: the
// message after the logging prefix "DATE TIME | INFO | <logger> | ", the values (fairseq writes
// them as "{:g}" strings) back to numbers; other lines (and the configuration) are skipped.
inline std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream is(out);
  std::string line;
  while (std::getline(is, line)) {
    const size_t at = line.find(" | {");
    if (at == std::string::npos || line.back() != '}') continue;
    if (line.find(" | fairseq_cli.train | {") != std::string::npos) continue;  // the configuration
    nlohmann::json j = nlohmann::json::parse(line.substr(at + 3));
    for (auto& [k, val] : j.items()) {
      if (!val.is_string()) continue;
      const std::string text = val.get<std::string>();
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (end && *end == '\0' && !text.empty()) {
        if (d == static_cast<double>(static_cast<int64_t>(d)) && text.find_first_of(".e") == std::string::npos)
          val = static_cast<int64_t>(d);
        else
          val = d;
      }
    }
    v.push_back(std::move(j));
  }
  return v;
}

// Update number -> {field: value} of each log line with num_updates and every one of `fields`
// (fairseq's train_inner lines; validation lines lack "loss"), for comparing runs update by update.
inline std::map<int64_t, nlohmann::json> update_lines(const std::string& out, const std::vector<std::string>& fields) {
  std::map<int64_t, nlohmann::json> m;
  for (const auto& j : json_lines(out)) {
    bool all = j.contains("num_updates");
    for (const auto& f : fields) all = all && j.contains(f);
    if (!all) continue;
    nlohmann::json row;
    for (const auto& f : fields) row[f] = j.at(f);
    m[j.at("num_updates").get<int64_t>()] = row;
  }
  return m;
}

inline int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace stretch::train::testing
