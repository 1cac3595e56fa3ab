#include "core/error.h"

#include <cerrno>
#include <cstring>

namespace stretch {

void fail_usage(const std::string& message, const std::string& hint) {
  throw Error(ErrorKind::Usage, message, hint);
}

void fail_input(const std::string& path, const std::string& message, const std::string& hint) {
  throw Error(ErrorKind::Input, path + ": " + message, hint);
}

void fail_io(const std::string& path, const std::string& message, const std::string& hint) {
  throw Error(ErrorKind::Io, path + ": " + message, hint);
}

void fail_internal(const char* file, int line, const std::string& message) {
  throw Error(ErrorKind::Internal, std::string(file) + ":" + std::to_string(line) + ": " + message,
              "this is a bug in stretch; please report it with the command that triggered it");
}

}  // namespace stretch
