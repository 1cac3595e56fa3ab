#include "core/log.h"

#include <cstdio>
#include <mutex>
#include <set>

namespace stretch {
namespace {
LogLevel g_level = LogLevel::Info;
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level = level; }

void log(LogLevel level, const std::string& message) {
  if (level < g_level) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "stretch | %s | %s\n", level_name(level), message.c_str());
}

void log_once(LogLevel level, const std::string& message) {
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!seen.insert(message).second) return;
  }
  log(level, message);
}
}  // namespace stretch
