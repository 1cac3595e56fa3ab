// train/progress.h — training logs as fairseq 0.12.2 writes them (fairseq/logging/progress_bar.py,
// meters.py; fairseq_cli/train.py), so log parsers and plotting scripts written for fairseq read
// stretch's logs. Every line goes to stdout with Python logging's prefix
//   "2026-12-01 13:19:00 | INFO | <logger> | <message>"
// (fairseq's logging.basicConfig: local time, "%Y-%m-%d %H:%M:%S").
//   simple  train_inner: "epoch 001:    100 / 1816 loss=9.995, ppl=1021.3, wps=..., ..."
//           print:       "epoch 001 | loss 9.995 | ppl ..." (tag "train"), or
//                        "epoch 001 | valid on 'valid' subset | loss ... | best_loss ..." (tag = the subset)
//   json    train_inner: {"epoch": 1, "update": 0.055, "loss": "9.995", ...} (values as strings, "{:g}")
//           print:       {"epoch": 1, "train_loss": "9.995", ...} (keys prefixed by the tag)
//   tqdm    a bar on stderr ("epoch 001:  45%|####  | 45/100 [00:10<00:12,  4.50it/s, loss=...]"),
//           print lines as in simple; falls back to simple when stderr is not a terminal
//   none    no train_inner/print lines (other logger lines still appear, as in fairseq)
// A Stat's value is rounded as fairseq's meter rounds it (loss 3 decimals, ppl 2, wps 1, ...)
// and then formatted with "{:g}" (6 significant digits). `full_precision` (stretch's
// --log-full-precision) writes JSON values as numbers with every digit instead, for exact
// comparisons between runs; the keys and line layout stay fairseq's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tensorboard_writer.h"
#include "train/train_config.h"

namespace stretch::train {

struct Stat {
  std::string key{};
  double value = 0;
  int round = -1;  // decimals fairseq's meter rounds to; -1: not rounded
};
using Stats = std::vector<Stat>;

// fairseq's format_stat of a rounded meter value: "{:g}".format(round(v, r)).
std::string format_stat(double value, int round);
// Python's repr(float): the shortest text that reads back to the same double ("5.0", "0.055").
std::string python_float_repr(double value);
// One line of fairseq's logging to stdout: "<local time> | <level> | <logger> | <message>".
void fairseq_log(const std::string& logger, const std::string& message, const std::string& level = "INFO");
// --log-file PATH (fairseq's common.log_file): fairseq_cli/train.py and its progress bar add a
// logging.FileHandler, so the messages of the "fairseq_cli.train" logger and the progress lines
// (train_inner, the train summary, validation) are also appended to PATH, bare (no time, level or
// logger name). Other loggers (fairseq.checkpoint_utils, fairseq.trainer) stay on stdout only, as
// there. Checks now that PATH can be written (an error naming it); the file is opened, for
// appending, at the first line. A failed write warns once and the log goes on, on stdout. An empty
// PATH closes the file of an earlier run in this process and writes none.
void set_fairseq_log_file(const std::string& path);

class Progress {
 public:
  Progress(LogFormat format, int64_t log_interval, bool full_precision);
  // A new epoch's iterator of `size` updates, starting after `done` of them (a resume mid-epoch).
  void begin_epoch(int64_t epoch, int64_t size, int64_t done);
  // `done` updates of the epoch are finished (the tqdm bar moves; the others ignore it).
  void step(int64_t done);
  // fairseq's progress.log(stats, tag="train_inner", step=num_updates) after update `done` of the epoch.
  void log(const Stats& stats, int64_t done, int64_t num_updates);
  // fairseq's progress.print(stats, tag): the end-of-epoch "train" summary, or a validation
  // summary with prefix "valid on 'SUBSET' subset" and tag SUBSET.
  void print(const std::string& tag, const std::string& prefix, const Stats& stats);
  // Clears the tqdm bar (fairseq's tqdm has leave=False).
  void end_epoch();
  // fairseq_log() with the bar cleared first (the next step redraws it).
  void info(const std::string& logger, const std::string& message);
  // --tensorboard-logdir: log() and print() also write their stats as TensorBoard scalars
  // (train/tensorboard_writer.h: run = the tag, step = num_updates), whatever the log format.
  void set_tensorboard(std::unique_ptr<TensorboardWriter> writer) { tensorboard_ = std::move(writer); }
  LogFormat format() const { return format_; }
  int64_t epoch() const { return epoch_; }

 private:
  std::string value_text(const Stat& s) const;
  std::string json_value(const Stat& s) const;
  void draw_bar(bool force);
  void clear_bar();

  LogFormat format_;
  int64_t log_interval_;
  bool full_precision_;
  int64_t epoch_ = 1, size_ = 0, start_ = 0, done_ = 0;
  double epoch_t0_ = 0, last_draw_ = -1;
  std::string postfix_{};
  size_t last_len_ = 0;
  bool bar_shown_ = false;
  std::unique_ptr<TensorboardWriter> tensorboard_{};
  void write_tensorboard(const std::string& tag, const Stats& stats, int64_t step);
};

}  // namespace stretch::train
