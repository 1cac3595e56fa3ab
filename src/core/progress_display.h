// core/progress_display.h — progress of a long job (eval-lm, each sweep cell, preprocess of a
// large file) on stderr, so stdout keeps only the results.
//   On a terminal: one bar redrawn in place at most 10 times a second, as tqdm draws it
//     "eval-lm valid:  45%|█████▍      | 12345/27433 tokens [00:10<00:12, 1234.5 tokens/s]"
//     and cleared by finish().
//   Otherwise (a log file, a pipe): one line each time another tenth of the work is done
//     "stretch | progress | eval-lm valid: 12345/27433 tokens (45%), 1234.5 tokens/s, ETA 00:12"
// total <= 0 shows counts without a percentage or ETA.
#pragma once
#include <cstdint>
#include <string>

namespace stretch {

class ProgressDisplay {
 public:
  ProgressDisplay(std::string label, int64_t total, std::string unit);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;
  void update(int64_t done);
  // Clears the bar (a terminal) and forgets it; later updates draw nothing.
  void finish();
  bool on_terminal() const { return tty_; }

 private:
  void draw();
  std::string label_, unit_;
  int64_t total_ = 0, done_ = 0;
  int next_tenth_ = 1;
  double t0_ = 0, last_draw_ = -1;
  size_t last_len_ = 0;
  bool tty_ = false, active_ = true;
};

}  // namespace stretch
