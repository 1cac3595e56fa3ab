#include "train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace stretch::train {

namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string printf_text(const char* fmt, double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, fmt, v);
  if (n >= 0 && n < static_cast<int>(sizeof buf)) return buf;
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), fmt, v);
  big.resize(static_cast<size_t>(n));
  return big;
}

// Python's round(v, r): the correctly rounded decimal (glibc's printf rounds the exact binary value).
double python_round(double v, int r) {
  if (r < 0 || !std::isfinite(v)) return v;
  const std::string fmt = "%." + std::to_string(r) + "f";
  return std::strtod(printf_text(fmt.c_str(), v).c_str(), nullptr);
}

// tqdm's format_interval: "MM:SS", or "H:MM:SS" from an hour on.
std::string format_interval(double seconds) {
  const int64_t t = static_cast<int64_t>(seconds);
  const int64_t h = t / 3600, m = t / 60 % 60, s = t % 60;
  char buf[48];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(s));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", static_cast<long long>(m), static_cast<long long>(s));
  return buf;
}

int terminal_columns() {
  winsize ws{};
  if (ioctl(fileno(stderr), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Display width of UTF-8 text (the bar's block characters are one column each).
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string display_trim(const std::string& s, size_t width) {
  size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == width) break;
      ++n;
    }
  }
  return s.substr(0, i);
}

}  // namespace

std::string format_stat(double value, int round) { return printf_text("%g", python_round(value, round)); }

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX", the shortest digits that read back
  std::string sign;
  if (sci[0] == '-') sign = "-", sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) {  // Python's repr: scientific outside [1e-4, 1e16)
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + m + ebuf;
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return sign + out;
}

namespace {
// --log-file: the path, and the stream once the first line is written.
struct LogFile {
  std::string path{};
  std::FILE* out = nullptr;
  bool failed = false;
};
LogFile& log_file() {
  static LogFile f;
  return f;
}

void append_to_log_file(const std::string& logger, const std::string& message) {
  LogFile& f = log_file();
  // fairseq's handlers sit on "fairseq_cli.train" and on the progress bar's logger, which
  // logs under its tags (train_inner, train, the validation subsets): not on fairseq.*.
  if (f.path.empty() || f.failed || (logger != "fairseq_cli.train" && logger.rfind("fairseq", 0) == 0)) return;
  if (f.out == nullptr) f.out = std::fopen(f.path.c_str(), "a");
  const bool ok = f.out != nullptr && std::fputs(message.c_str(), f.out) >= 0 && std::fputc('\n', f.out) != EOF &&
                  std::fflush(f.out) == 0;
  if (!ok) {
    f.failed = true;
    log_warning("--log-file " + f.path + ": cannot write (" + std::strerror(errno) +
                "); the log goes on on stdout only");
  }
}
}  // namespace

void set_fairseq_log_file(const std::string& path) {
  namespace fs = std::filesystem;
  LogFile& f = log_file();
  if (f.out != nullptr) std::fclose(f.out);
  f = LogFile{};  // an earlier run's file (the Python module trains several times in one process)
  if (path.empty()) return;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (fs::is_directory(p, ec)) fail_usage("--log-file " + path + ": is a directory", "give a file name, e.g. DIR/train.log");
  if (!fs::is_directory(dir, ec))
    fail_io(path, "--log-file: the directory " + dir.string() + " does not exist", "create it first (fairseq does not either)");
  const bool exists = fs::exists(p, ec);
  if (::access(exists ? path.c_str() : dir.c_str(), W_OK) != 0)
    fail_io(path, std::string("--log-file: cannot write there (") + std::strerror(errno) + ")",
            "give a writable path");
  f.path = path;
}

void fairseq_log(const std::string& logger, const std::string& message, const std::string& level) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  std::cout << stamp << " | " << level << " | " << logger << " | " << message << std::endl;
  append_to_log_file(logger, message);
}

Progress::Progress(LogFormat format, int64_t log_interval, bool full_precision)
    : format_(format), log_interval_(log_interval), full_precision_(full_precision) {
  if (format_ == LogFormat::Tqdm && !isatty(fileno(stderr))) format_ = LogFormat::Simple;  // as fairseq
}

std::string Progress::value_text(const Stat& s) const { return format_stat(s.value, s.round); }

std::string Progress::json_value(const Stat& s) const {
  if (!full_precision_) return nlohmann::json(value_text(s)).dump();
  if (s.value == std::floor(s.value) && std::fabs(s.value) < 9.0e15) return std::to_string(static_cast<int64_t>(s.value));
  return nlohmann::json(s.value).dump();
}

void Progress::begin_epoch(int64_t epoch, int64_t size, int64_t done) {
  epoch_ = epoch, size_ = size, start_ = done_ = done;
  epoch_t0_ = now_seconds();
  last_draw_ = -1;
  postfix_.clear();
  if (format_ == LogFormat::Tqdm) draw_bar(true);
}

void Progress::step(int64_t done) {
  done_ = done;
  if (format_ == LogFormat::Tqdm) draw_bar(false);
}

// fairseq's _log_to_tensorboard: every stat but num_updates, at step num_updates, as the meter rounds it.
void Progress::write_tensorboard(const std::string& tag, const Stats& stats, int64_t step) {
  std::vector<TensorboardScalar> scalars;
  for (const Stat& s : stats)
    if (s.key != "num_updates") scalars.push_back({s.key, static_cast<float>(python_round(s.value, s.round))});
  tensorboard_->write(tag, step, scalars);
}

void Progress::log(const Stats& stats, int64_t done, int64_t num_updates) {
  done_ = done;
  if (tensorboard_ && num_updates > 0 && num_updates % log_interval_ == 0)
    write_tensorboard("train_inner", stats, num_updates);
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "epoch %03lld", static_cast<long long>(epoch_));
  if (format_ == LogFormat::Tqdm) {  // tqdm.set_postfix: the stats ride on the bar
    postfix_.clear();
    for (const Stat& s : stats) postfix_ += (postfix_.empty() ? "" : ", ") + s.key + "=" + value_text(s);
    draw_bar(false);
    return;
  }
  if (format_ == LogFormat::None || num_updates <= 0 || num_updates % log_interval_ != 0) return;
  if (format_ == LogFormat::Json) {
    const double update = python_round(static_cast<double>(epoch_ - 1) + static_cast<double>(done) /
                                                                            static_cast<double>(std::max<int64_t>(size_, 1)),
                                       3);
    std::string line = "{\"epoch\": " + std::to_string(epoch_) + ", \"update\": " + python_float_repr(update);
    for (const Stat& s : stats) line += ", \"" + s.key + "\": " + json_value(s);
    fairseq_log("train_inner", line + "}");
    return;
  }
  char head[96];
  std::snprintf(head, sizeof head, "%s:  %5lld / %lld ", prefix, static_cast<long long>(done),
                static_cast<long long>(size_));
  std::string line = head;
  for (size_t i = 0; i < stats.size(); ++i) line += (i ? ", " : "") + stats[i].key + "=" + value_text(stats[i]);
  fairseq_log("train_inner", line);
}

void Progress::print(const std::string& tag, const std::string& prefix, const Stats& stats) {
  if (tensorboard_) {
    int64_t step = 0;  // fairseq: stats["num_updates"]
    for (const Stat& s : stats)
      if (s.key == "num_updates") step = static_cast<int64_t>(s.value);
    write_tensorboard(tag, stats, step);
  }
  if (format_ == LogFormat::None) return;
  clear_bar();
  if (format_ == LogFormat::Json) {
    std::string line = "{\"epoch\": " + std::to_string(epoch_);
    for (const Stat& s : stats) line += ", \"" + tag + "_" + s.key + "\": " + json_value(s);
    fairseq_log(tag, line + "}");
    return;
  }
  char head[32];
  std::snprintf(head, sizeof head, "epoch %03lld", static_cast<long long>(epoch_));
  std::string line = head;
  if (!prefix.empty()) line += " | " + prefix;
  line += " |";
  for (size_t i = 0; i < stats.size(); ++i) line += (i ? " | " : " ") + stats[i].key + " " + value_text(stats[i]);
  fairseq_log(tag, line);
}

void Progress::end_epoch() { clear_bar(); }

void Progress::info(const std::string& logger, const std::string& message) {
  clear_bar();
  fairseq_log(logger, message);
}

// tqdm's default bar: "{desc}: {percentage:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]",
// the bar filling what the terminal width leaves, the line cut at the width; redrawn at most every 0.1 s.
void Progress::draw_bar(bool force) {
  const double t = now_seconds();
  if (!force && done_ < size_ && last_draw_ >= 0 && t - last_draw_ < 0.1) return;
  last_draw_ = t;
  const double elapsed = t - epoch_t0_;
  const double rate = elapsed > 0 ? static_cast<double>(done_ - start_) / elapsed : 0.0;
  const double frac = size_ > 0 ? static_cast<double>(done_) / static_cast<double>(size_) : 0.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "epoch %03lld: %3.0f%%|", static_cast<long long>(epoch_), frac * 100.0);
  const std::string l_bar = buf;
  std::string rate_text = "?it/s";
  if (rate > 0) rate_text = rate < 1 ? printf_text("%5.2f", 1.0 / rate) + "s/it" : printf_text("%5.2f", rate) + "it/s";
  const std::string remaining = rate > 0 ? format_interval(static_cast<double>(size_ - done_) / rate) : "?";
  const std::string r_bar = "| " + std::to_string(done_) + "/" + std::to_string(size_) + " [" +
                            format_interval(elapsed) + "<" + remaining + ", " + rate_text +
                            (postfix_.empty() ? "" : ", " + postfix_) + "]";
  const size_t cols = static_cast<size_t>(terminal_columns());
  const size_t fixed = display_width(l_bar) + display_width(r_bar);
  const int64_t nbars = std::max<int64_t>(1, static_cast<int64_t>(cols) - static_cast<int64_t>(fixed));
  static const char* const kPartial[8] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int64_t eighths = static_cast<int64_t>(frac * static_cast<double>(nbars) * 8);
  const int64_t full = std::min(nbars, eighths / 8);
  std::string bar;
  for (int64_t i = 0; i < full; ++i) bar += "█";
  if (full < nbars) {
    bar += kPartial[eighths % 8];
    bar += std::string(static_cast<size_t>(nbars - full - 1), ' ');
  }
  const std::string line = display_trim(l_bar + bar + r_bar, cols);
  const size_t len = display_width(line);
  std::fprintf(stderr, "\r%s%s", line.c_str(), std::string(last_len_ > len ? last_len_ - len : 0, ' ').c_str());
  std::fflush(stderr);
  last_len_ = len;
  bar_shown_ = true;
}

void Progress::clear_bar() {
  if (!bar_shown_) return;
  std::fprintf(stderr, "\r%s\r", std::string(last_len_, ' ').c_str());
  std::fflush(stderr);
  bar_shown_ = false;
  last_len_ = 0;
  last_draw_ = -1;
}

}  // namespace stretch::train
