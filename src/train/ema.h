// train/ema.h — fairseq's --store-ema (fairseq/models/ema/ema.py, trainer.py): an exponential moving
// average of the weights, kept beside the run and saved in its checkpoints; training never reads it.
// Contract (fairseq 0.12.2's, every point checked against real fairseq-train in
// tests/fairseq/check_ema.py):
// - after each applied update u (u = num_updates after it), decay = 0 if u < --ema-start-update, else
//   --ema-decay; every --ema-update-freq-th update (a counter of updates, saved so a resume continues
//   it) each parameter's average becomes avg·decay + w·(1 − decay) in fp32: the product rounded, then
//   the sum as one fused multiply-add (torch's mul_ then add_(alpha), whose vector kernel is an FMA).
// - the average starts as a copy of the weights when it is first needed: the first update on a fresh
//   start (fairseq builds it lazily), or a resume whose file has none (a stretch checkpoint written
//   without --store-ema, a fairseq .pt; one warning).
// - a checkpoint stores it as "ema.<parameter name>" tensors; `stretch export-fairseq` writes them as
//   extra_state["ema"], where fairseq's checkpoint_utils.load_ema_from_checkpoint finds them.
// - --ema-fp32 changes nothing here (stretch's weights are fp32); --ema-seed-model is refused.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/safetensors.h"

namespace stretch::train {

struct EmaSettings {
  bool store = false;        // --store-ema
  double decay = 0.9999;     // --ema-decay, in [0, 1]
  int64_t start_update = 0;  // --ema-start-update: decay 0 (a copy of the weights) before this update
  int64_t update_freq = 1;   // --ema-update-freq >= 1
  bool fp32 = false;         // --ema-fp32 (no effect: fp32 weights)
  std::string seed_model{};  // --ema-seed-model (refused)
};

class Ema {
 public:
  bool built() const { return !avg_.empty(); }
  // A copy of the weights (fairseq's deepcopy of the model).
  void seed_from(const std::vector<optim::OptimParam>& params);
  // After update `num_updates` was applied; `counter` is TrainState::ema_update_counter.
  void step(const std::vector<optim::OptimParam>& params, int64_t num_updates, const EmaSettings& s, int64_t& counter);
  // The decay the last step used (fairseq's "ema_decay" log field): --ema-decay before any step.
  double last_decay() const { return last_decay_; }
  void set_last_decay(double d) { last_decay_ = d; }
  // "ema.<name>" tensors for a checkpoint; unbuilt: the weights themselves (fairseq builds it to save).
  NamedTensors save(const std::vector<optim::OptimParam>& params) const;
  // From a checkpoint's "ema.<name>" tensors (names as saved); false when it has none. Errors name
  // `source` and the parameter.
  bool load(const NamedTensors& file_tensors, const std::vector<optim::OptimParam>& params, const std::string& source);

 private:
  std::vector<std::vector<float>> avg_;  // one per parameter, in params order
  double last_decay_ = 0;
};

// The update rule on one tensor: avg = fma(w, float(1 − decay), avg · float(decay)).
void ema_update(float* avg, const float* w, int64_t n, double decay);

}  // namespace stretch::train
