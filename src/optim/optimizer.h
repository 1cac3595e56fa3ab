// optim/optimizer.h — the optimizers, with fairseq's (or torch.optim's) exact update rules.
// Contract:
//  * Parameters are raw views (OptimParam), so this layer never depends on the model code.
//    step(params, lr) updates every params[i].value from params[i].grad in fp32 (like torch:
//    scalars are formed in double and rounded to float once, element math is float). Grads
//    are read, never zeroed. OpenMP over elements; results do not depend on the thread count.
//  * State (momentum buffers, moments, accumulators, step counts) is keyed by parameter
//    NAME, created zero-initialised the first time a name is stepped. Pass each parameter
//    once per step (a tied parameter is one parameter); a repeated name is an error.
//  * lr is the learning rate of THIS update: the trainer passes LrSchedule::lr_at(n) for
//    update n+1 (optim/lr_scheduler.h). Optimizers never schedule.
//  * state_dict() gives named fp32 tensors "<param name>.<slot>" (shape [N], N = numel;
//    adafactor's factored rows/columns are [numel/C] and [numel/R], flattened) plus
//    JSON scalars; the trainer stores both in the checkpoint (tensors under a prefix of its
//    choice, scalars in __metadata__ as a JSON string). load_state_dict() validates kind,
//    names and sizes and fails with one clear message on any mismatch.
//
// Update rules (g = grad, p = value, all per element; wd = weight decay):
//  nag      fairseq NAG (REFERENCE §3.3), c = lr / lr_old (lr_old = lr of the previous step):
//             p *= 1 − lr·wd;  p += μ²·c·buf;  p −= (1+μ)·lr·g;  buf = μ·c·buf − lr·g
//           lr_old = 0 (a previous step at lr 0) makes buf = 0, and c·buf is taken as 0
//           (fairseq would raise ZeroDivisionError there).
//  sgd      torch.optim.SGD (dampening 0, no nesterov): d = g + wd·p; buf = d on the first
//           step, else buf = μ·buf + d; p −= lr·buf (p −= lr·d when μ = 0)
//  adam     fairseq Adam (decoupled weight decay, eps OUTSIDE the bias correction):
//             m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;  s = lr·sqrt(1−β2^t)/(1−β1^t)
//             p −= wd·lr·p;  p −= s·m / (sqrt(v) + eps)
//  adamw    torch.optim.AdamW (with wd = 0 exactly torch.optim.Adam):
//             p *= 1 − lr·wd;  m, v as above;  p −= lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
//  adagrad  torch.optim.Adagrad: d = g + wd·p; clr = lr / (1 + (t−1)·lr_decay);
//             sum += d²;  p −= clr · d / (sqrt(sum) + eps)        (eps default 1e-10)
//  adagrad_with_grad_clip  fairseq examples/adaptive_span (REFERENCE §5.5): adagrad whose
//             clr is scaled by clip / (‖d‖₂ + 1e-10) when ‖d‖₂ (this tensor only) > clip
//             (clip = --adagrad-clip > 0); the accumulator gets the UNclipped d.
//  adafactor  fairseq's Adafactor (fairseq/optim/adafactor.py), optim/adafactor.cpp: factored
//             second moments over the last two dims of OptimParam::shape (rank ≥ 2), the RMS
//             update clip, optional first moment, relative step and parameter scaling.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/tensor.h"

namespace stretch::optim {

// One parameter as the optimizer sees it: value and grad are numel contiguous floats.
struct OptimParam {
  std::string name;      // fairseq state-dict name, unique, e.g. "decoder.layers.0.fc1.weight"
  float* value;          // [N]
  float* grad;           // [N]
  int64_t numel;         // N
  // fairseq's (PyTorch's) shape of the parameter, e.g. [out, in] for a Linear weight, [V, C]
  // for an embedding; empty = [N]. Only adafactor reads it (it factors the last two dims).
  std::vector<int64_t> shape = {};
};

enum class OptimizerKind { Nag, Sgd, Adam, AdamW, Adagrad, AdagradWithGradClip, Adafactor };
inline constexpr int kOptimizerKindCount = 7;

// Typed optimizer config (fairseq flag in the comment). Unset optionals take the kind's
// default: momentum 0.99 for nag, 0 for sgd; eps 1e-8 for adam/adamw, 1e-10 for adagrad*.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Nag;    // --optimizer
  std::optional<double> momentum = {};        // --momentum (nag, sgd)
  double weight_decay = 0.0;                  // --weight-decay / --wd (all)
  double beta1 = 0.9;                         // --adam-betas "(β1, β2)"
  double beta2 = 0.999;
  std::optional<double> eps = {};             // --adam-eps (adam, adamw); adagrad's eps
  double adagrad_clip = 0.0;                  // --adagrad-clip (adagrad_with_grad_clip)
  double lr_decay = 0.0;                      // torch.optim.Adagrad lr_decay (adagrad*)
  double initial_accumulator_value = 0.0;     // torch.optim.Adagrad (adagrad*)
  // adafactor (fairseq's FairseqAdafactor flags and defaults)
  double adafactor_eps1 = 1e-30;              // --adafactor-eps "(eps1, eps2)": added to g²
  double adafactor_eps2 = 1e-3;               //   ... and the floor of the parameter RMS
  double clip_threshold = 1.0;                // --clip-threshold: the update's RMS bound (> 0)
  double decay_rate = -0.8;                   // --decay-rate: β2(t) = 1 − t^decay_rate (< 0)
  std::optional<double> adafactor_beta1 = {}; // --beta1: first moment (unset: none)
  bool scale_parameter = false;               // --scale-parameter
  bool relative_step = false;                 // --relative-step: lr = min(1e-2, 1/sqrt(t)), not the schedule's
  bool warmup_init = false;                   // --warmup-init (needs relative_step): min(1e-6·t, 1/sqrt(t))
};

// Optimizer state as it goes into a checkpoint.
struct OptimizerState {
  std::vector<std::pair<std::string, Tensor>> tensors;  // "<param>.<slot>": [N] F32
  nlohmann::json scalars;  // {"optimizer": name, "version": 1, "steps": {param: t}, ...}
  std::string source = "optimizer state";  // named in load errors (e.g. the checkpoint path)
};

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config) : config_(config) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const OptimizerConfig& config() const { return config_; }
  OptimizerKind kind() const { return config_.kind; }

  // One update of every parameter with learning rate lr (finite, ≥ 0). With grad_factor ≠ 1 the
  // update uses grad · f (f = float(grad_factor)), bitwise what multiply_grads(params, grad_factor)
  // followed by step(params, lr) gives: NAG and Adam multiply inside their update loop (one pass
  // over the gradients fewer; the grads are left unscaled), the others get multiply_grads first.
  void step(std::span<const OptimParam> params, double lr, double grad_factor = 1.0);

  // The tensors are VIEWS of the live state (no copy, like torch): write them out before
  // the next step(). load_state_dict() copies, so a loaded optimizer shares nothing.
  OptimizerState state_dict() const;
  // Replaces all state. params are the parameters that will be stepped: every one of them
  // must have state in `state` with the right size (or `state` holds no parameter at all:
  // a fresh optimizer), and `state` may hold nothing else.
  void load_state_dict(const OptimizerState& state, std::span<const OptimParam> params);

  // Per-parameter update count (0 if never stepped).
  int64_t step_count(const std::string& name) const;

 protected:
  struct ParamState {
    int64_t step = 0;      // updates applied so far (torch's state["step"])
    int64_t numel = 0;
    Tensor slot[3];        // [slot_layout(p)[s].numel] each
    std::vector<std::string> slot_name;  // slot_layout(p)'s names, in order
    uint64_t last_call = 0;
  };
  struct SlotSpec {
    std::string name;
    int64_t numel;         // elements of the slot (the parameter's N for all but adafactor's factors)
  };
  // Slot names of this kind, in order (0, 1 or 2 of them), each [N].
  virtual std::vector<std::string> slot_names() const = 0;
  // The slots of parameter p (at most 3): by default slot_names(), each with p.numel elements.
  virtual std::vector<SlotSpec> slot_layout(const OptimParam& p) const;
  // Per-parameter update; st.step has already been incremented. lr is this update's rate.
  virtual void update(const OptimParam& p, ParamState& st, double lr) = 0;
  // Called once per step() before/after the per-parameter updates (NAG's lr_old).
  virtual void begin_step(double lr) {}
  virtual void end_step(double lr) {}
  virtual void save_scalars(nlohmann::json& out) const {}
  virtual void load_scalars(const nlohmann::json& in, const std::string& source) {}
  // Slot value at start (torch.optim.Adagrad's initial_accumulator_value).
  virtual float slot_init(int slot) const { return 0.0f; }
  // True when update() reads grad · grad_factor_ itself (see step()).
  virtual bool scales_grads_in_update() const { return false; }

  OptimizerConfig config_;
  float grad_factor_ = 1.0f;  // this step()'s grad multiplier, for scales_grads_in_update() kinds

 private:
  ParamState& state_for(const OptimParam& p);
  std::map<std::string, ParamState> state_;
  uint64_t calls_ = 0;
};

// Builds the optimizer; validates the config (fail_usage naming the flag).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

// Names as fairseq's --optimizer spells them: nag, sgd, adam, adamw, adagrad,
// adagrad_with_grad_clip, adafactor.
const char* optimizer_kind_name(OptimizerKind kind);
OptimizerKind parse_optimizer_kind(std::string_view name);  // fail_usage on an unknown name

// fairseq --adam-betas: "(0.9, 0.98)", "[0.9,0.98]" or "0.9,0.98"; each in [0, 1).
std::pair<double, double> parse_adam_betas(std::string_view text);

// A fairseq float list flag (--lr "0.25" or "0.25,0.1"): comma separated, optional
// brackets. `flag` names the flag in errors.
std::vector<double> parse_float_list(std::string_view flag, std::string_view text);

// fairseq --adafactor-eps "(1e-30, 1e-3)" (fairseq eval()s it): two finite numbers >= 0.
std::pair<double, double> parse_adafactor_eps(std::string_view text);

}  // namespace stretch::optim
