#include "core/progress_display.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace stretch {
namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string interval(double seconds) {
  const long long t = static_cast<long long>(seconds);
  char buf[48];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", t / 60, t % 60);
  return buf;
}

int columns() {
  winsize ws{};
  if (ioctl(fileno(stderr), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

ProgressDisplay::ProgressDisplay(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), t0_(now_seconds()),
      tty_(isatty(fileno(stderr)) != 0) {
  if (tty_) draw();
}

ProgressDisplay::~ProgressDisplay() { finish(); }

void ProgressDisplay::update(int64_t done) {
  if (!active_) return;
  done_ = done;
  const double t = now_seconds();
  if (tty_) {
    if (last_draw_ < 0 || t - last_draw_ >= 0.1 || (total_ > 0 && done_ >= total_)) draw();
    return;
  }
  if (total_ <= 0) return;
  // A line at each further tenth (several tenths at once: one line).
  const int tenth = static_cast<int>(10 * done_ / total_);
  if (tenth < next_tenth_) return;
  next_tenth_ = tenth + 1;
  const double elapsed = t - t0_;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  std::fprintf(stderr, "stretch | progress | %s: %lld/%lld %s (%d%%), %.1f %s/s, ETA %s\n", label_.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), unit_.c_str(),
               static_cast<int>(100 * done_ / total_), rate, unit_.c_str(),
               rate > 0 ? interval(static_cast<double>(total_ - done_) / rate).c_str() : "?");
  std::fflush(stderr);
}

void ProgressDisplay::draw() {
  const double t = now_seconds();
  last_draw_ = t;
  const double elapsed = t - t0_;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  char head[256], tail[256];
  std::string line;
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    std::snprintf(head, sizeof head, "%s: %3.0f%%|", label_.c_str(), 100.0 * frac);
    std::snprintf(tail, sizeof tail, "| %lld/%lld %s [%s<%s, %.1f %s/s]", static_cast<long long>(done_),
                  static_cast<long long>(total_), unit_.c_str(), interval(elapsed).c_str(),
                  rate > 0 ? interval(static_cast<double>(total_ - done_) / rate).c_str() : "?", rate, unit_.c_str());
    const int width = std::max(1, columns() - 1 - static_cast<int>(std::string(head).size() + std::string(tail).size()));
    static const char* const kPartial[8] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const int eighths = static_cast<int>(frac * width * 8);
    const int full = std::min(width, eighths / 8);
    std::string bar;
    for (int i = 0; i < full; ++i) bar += "█";
    if (full < width) bar += kPartial[eighths % 8] + std::string(static_cast<size_t>(width - full - 1), ' ');
    line = std::string(head) + bar + tail;
  } else {
    std::snprintf(head, sizeof head, "%s: %lld %s [%s, %.1f %s/s]", label_.c_str(), static_cast<long long>(done_),
                  unit_.c_str(), interval(elapsed).c_str(), rate, unit_.c_str());
    line = head;
  }
  size_t len = 0;
  for (unsigned char ch : line) len += (ch & 0xC0) != 0x80;
  std::fprintf(stderr, "\r%s%s", line.c_str(), std::string(last_len_ > len ? last_len_ - len : 0, ' ').c_str());
  std::fflush(stderr);
  last_len_ = len;
}

void ProgressDisplay::finish() {
  if (!active_) return;
  active_ = false;
  if (tty_ && last_len_ > 0) {
    std::fprintf(stderr, "\r%s\r", std::string(last_len_, ' ').c_str());
    std::fflush(stderr);
  }
}

}  // namespace stretch
