// core/error.h — one error type for the whole program.
// Contract: every failure the user can cause (bad flag, missing or corrupt file, NaN loss)
// throws stretch::Error carrying WHAT went wrong, WHERE (file, flag, byte offset or line),
// and a HINT of what to do. The CLI catches it, prints one message and exits with
// exit_code (2 for usage errors, 1 otherwise). Internal invariants use STRETCH_CHECK,
// which adds the source file:line (llm.c's xxxCheck habit).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace stretch {

enum class ErrorKind { Usage, Input, Io, Numeric, Internal };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, std::string hint = "")
      : std::runtime_error(format(message, hint)), kind_(kind), message_(std::move(message)), hint_(std::move(hint)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }  // what() without the hint
  const std::string& hint() const { return hint_; }
  int exit_code() const { return kind_ == ErrorKind::Usage ? 2 : 1; }

 private:
  static std::string format(const std::string& m, const std::string& h) {
    return h.empty() ? m : m + "\n  hint: " + h;
  }
  ErrorKind kind_;
  std::string message_;
  std::string hint_;
};

// Convenience constructors: the message names the thing (file/flag/offset) first.
[[noreturn]] void fail_usage(const std::string& message, const std::string& hint = "");
[[noreturn]] void fail_input(const std::string& path, const std::string& message,
                             const std::string& hint = "");
[[noreturn]] void fail_io(const std::string& path, const std::string& message,
                          const std::string& hint = "");
[[noreturn]] void fail_internal(const char* file, int line, const std::string& message);

}  // namespace stretch

// Internal invariant: a violated check is a bug in stretch (or a caller), reported with file:line.
#define STRETCH_CHECK(cond, msg)                                                   \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::ostringstream stretch_check_os_;                                        \
      stretch_check_os_ << "check failed: " #cond ": " << msg;                     \
      ::stretch::fail_internal(__FILE__, __LINE__, stretch_check_os_.str());       \
    }                                                                              \
  } while (0)
