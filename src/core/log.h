// core/log.h — human log lines to stderr with a level; JSON lines are the trainer's business.
#pragma once
#include <string>

namespace stretch {
enum class LogLevel { Debug, Info, Warning, Error };
void set_log_level(LogLevel level);
void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& m) { log(LogLevel::Info, m); }
inline void log_warning(const std::string& m) { log(LogLevel::Warning, m); }
// Report a message once per process (e.g. "flag --ddp-backend has no meaning here").
void log_once(LogLevel level, const std::string& message);
}  // namespace stretch
