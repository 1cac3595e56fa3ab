#include "train/progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace stretch::train {

Progress::Progress(LogFormat format, bool progress_bar)
    : format_(format), bar_enabled_(progress_bar && isatty(fileno(stderr))) {}

void Progress::log(const std::string& tag, const nlohmann::ordered_json& fields) {
  end_bar();
  if (format_ == LogFormat::None) return;
  if (format_ == LogFormat::Json) {
    std::cout << fields.dump() << std::endl;
    return;
  }
  std::string line = tag + " |";
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    line += " " + it.key() + " ";
    if (it->is_number_float()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g", it->get<double>());
      line += buf;
    } else {
      line += it->is_string() ? it->get<std::string>() : it->dump();
    }
  }
  std::cout << line << std::endl;
}

void Progress::bar(int64_t epoch, int64_t done, int64_t total, double loss) {
  if (!bar_enabled_ || total <= 0) return;
  const int width = 30;
  int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "\repoch %03lld [%.*s%*s] %lld/%lld loss %.3f", static_cast<long long>(epoch), filled,
               "==============================", width - filled, "", static_cast<long long>(done),
               static_cast<long long>(total), loss);
  std::fflush(stderr);
  bar_active_ = true;
}

void Progress::end_bar() {
  if (bar_active_) std::fprintf(stderr, "\n");
  bar_active_ = false;
}

}  // namespace stretch::train
