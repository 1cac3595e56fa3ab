// train/progress.h — training logs: fairseq-style JSON lines (--log-format json) on stdout, a
// human line otherwise, and a one-line progress bar when stderr is a terminal.
// JSON fields use fairseq's names: epoch, update, loss, ppl (base 2), wps, ups, wpb, bsz,
// num_updates, lr, gnorm, clip, train_wall, wall; validation: valid_loss, valid_ppl, ...
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "train/train_config.h"

namespace stretch::train {

class Progress {
 public:
  Progress(LogFormat format, bool progress_bar);
  // tag: "train_inner", "train", "valid"
  void log(const std::string& tag, const nlohmann::ordered_json& fields);  // fields in fairseq's order
  void bar(int64_t epoch, int64_t done, int64_t total, double loss);
  void end_bar();

 private:
  LogFormat format_;
  bool bar_enabled_;
  bool bar_active_ = false;
};

}  // namespace stretch::train
