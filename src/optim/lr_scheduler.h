// optim/lr_scheduler.h — learning-rate schedules as pure functions of the update number,
// with fairseq's exact semantics (fairseq/optim/lr_scheduler/*.py; REFERENCE §3.4, §3.5).
//
// How the trainer uses it (fairseq's order, REFERENCE §3.2 step 4):
//   fairseq sets the lr at construction with step_update(0), and after every update calls
//   step_update(num_updates) with num_updates = updates completed so far. So
//       UPDATE u (1-based) USES lr_at(u − 1),
//   i.e. with n = updates done:  opt.step(params, sched.lr_at(n)); ++n;
//   The "lr" fairseq logs after an update is lr_at(n) with the new n (the next update's).
//   On resume nothing is stored: lr_at(n) recomputes it (fairseq's `fixed` keeps its epoch
//   lr, which lr_at_epoch recomputes from the epoch).
//
// Schedules (W = warmup_updates, n = num_updates):
//   fixed             base(epoch) · ((n+1)/W if n < W else 1), base(epoch) = lr[min(epoch−1,
//                     len−1)], or with --force-anneal F and epoch−1 ≥ F:
//                     lr[last]·lr_shrink^(epoch − F)   (epoch is 1-based)
//   inverse_sqrt      n < W: init + n·(lr − init)/W, else lr·sqrt(W)·n^−0.5
//                     (init = --warmup-init-lr, default 0 when W > 0; W must be > 0)
//   cosine            REFERENCE §3.4 exactly (warmup, periods growing by t_mult, lr_shrink
//                     per period, min_lr floor; period P ≤ 0 means max_update − W)
//   polynomial_decay  n ≤ W (W > 0): lr·n/W; n ≥ total: end_lr; else
//                     (lr − end_lr)·(1 − (n−W)/(total−W))^power + end_lr
//                     (so update 1 runs at lr 0 when W > 0, as in fairseq)
//   tri_stage         (fairseq tri_stage_lr_scheduler.py) peak = lr, init = init_lr_scale·lr;
//                     Ws, Hs, Ds = --warmup-steps/--hold-steps/--decay-steps, or with
//                     --phase-ratio (a, b, c): int(max_update·a), int(max_update·b), int(max_update·c);
//                     n < Ws: init + n·(peak − init)/Ws; n < Ws+Hs: peak;
//                     n ≤ Ws+Hs+Ds: peak·exp(−(−ln final_lr_scale / Ds)·(n − Ws − Hs));
//                     after: final_lr_scale·lr   (Ds must be > 0: fairseq divides by it)
//   triangular        (fairseq triangular_lr_scheduler.py) s = floor(P/2) (P = --lr-period-updates,
//                     default 5000), cycle = floor(n / 2s), k = lr_shrink^cycle,
//                     hi = max_lr·k, lo = lr (·k with --shrink-min),
//                     x = |n/s − 2(cycle+1) + 1|, lr = lo + (hi − lo)·max(0, 1 − x)
//   step              (fairseq step_lr_scheduler.py) init = --warmup-init-lr (< 0: --min-lr);
//                     n < W: init + n·(lr − init)/W; else
//                     max(lr·lr_decay^floor((n − W) / --lr-deacy-period), --min-lr)
//                     (--lr-deacy-period, fairseq's spelling, default 25000; --lr-decay default 0.5)
//   reduce_lr_on_plateau  (fairseq reduce_lr_on_plateau.py over torch's ReduceLROnPlateau, cooldown 0,
//                     min_lr 0, eps 1e-8, threshold_mode rel) NOT a pure function: it keeps a
//                     PlateauState that step_epoch() changes at the end of each epoch and that the
//                     trainer saves in checkpoint_last (train_state "lr_plateau").
//                     init = --warmup-init-lr (< 0: 0 when W > 0, else lr), step = (lr − init)/W;
//                     n ≤ W (W > 0): init + n·step; after: the state's lr (NaN until the first
//                     reduction: init + W·step, or lr when W = 0).
//                     step_epoch(epoch, metric, n): without a metric, or while the warmup has not
//                     ended (W > 0 and n ≤ W), only last_epoch = epoch. Else torch's step: better =
//                     metric < best·(1 − threshold) (--maximize-best-checkpoint-metric: metric >
//                     best·(threshold + 1); best starts at ±inf); better: best = metric, bad = 0, else
//                     ++bad; bad > --lr-patience: new = max(lr·--lr-shrink, 0), taken if lr − new > 1e-8,
//                     bad = 0. The metric is what fairseq passes: the first --valid-subset's
//                     --best-checkpoint-metric as logged (loss round(·, 3), ppl round(2^loss, 2)).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace stretch::optim {

enum class SchedulerKind { Fixed, InverseSqrt, Cosine, PolynomialDecay, TriStage, Triangular, ReduceLrOnPlateau, Step };
inline constexpr int kSchedulerKindCount = 8;

// Typed schedule config; fairseq flag and default in each comment.
struct SchedulerConfig {
  SchedulerKind kind = SchedulerKind::Fixed;  // --lr-scheduler (fairseq default fixed)
  std::vector<double> lr = {0.25};            // --lr (a list only for fixed: one per epoch)
  std::optional<int64_t> warmup_updates = {}; // --warmup-updates (4000 for inverse_sqrt, else 0)
  double warmup_init_lr = -1;                 // --warmup-init-lr (< 0: the schedule's default)
  double min_lr = 0.0;                        // --min-lr (cosine's floor; NOT a stop condition)
  int64_t max_update = 0;                     // --max-update (cosine period when P ≤ 0)
  double t_mult = 1.0;                        // --t-mult (cosine)
  double lr_period_updates = -1;              // --lr-period-updates (cosine)
  double lr_shrink = 0.1;                     // --lr-shrink (cosine, fixed with force-anneal)
  std::optional<int64_t> force_anneal = {};   // --force-anneal (fixed)
  double end_learning_rate = 0.0;             // --end-learning-rate (polynomial_decay)
  double power = 1.0;                         // --power (polynomial_decay)
  int64_t total_num_update = 1000000;         // --total-num-update (polynomial_decay)
  int64_t warmup_steps = 0;                   // --warmup-steps (tri_stage)
  int64_t hold_steps = 0;                     // --hold-steps (tri_stage)
  int64_t decay_steps = 0;                    // --decay-steps (tri_stage)
  std::optional<std::array<double, 3>> phase_ratio = {};  // --phase-ratio (tri_stage; overrides the steps)
  double init_lr_scale = 0.01;                // --init-lr-scale (tri_stage)
  double final_lr_scale = 0.01;               // --final-lr-scale (tri_stage)
  double max_lr = -1;                         // --max-lr (triangular; required there, > lr)
  bool shrink_min = false;                    // --shrink-min (triangular)
  int64_t lr_deacy_period = 25000;            // --lr-deacy-period (step; fairseq's spelling)
  double lr_decay = 0.5;                      // --lr-decay (step)
  double lr_threshold = 1e-4;                 // --lr-threshold (reduce_lr_on_plateau)
  int64_t lr_patience = 0;                    // --lr-patience (reduce_lr_on_plateau)
  bool maximize = false;                      // --maximize-best-checkpoint-metric (reduce_lr_on_plateau's mode)
};

// reduce_lr_on_plateau's state: what torch's ReduceLROnPlateau and the optimizer's lr hold
// between epochs (fairseq saves only best and last_epoch; num_bad_epochs and the reduced lr are
// kept here too, so a resumed run equals an uninterrupted one).
struct PlateauState {
  double lr = NAN;             // the lr after the last reduction; NaN: none yet
  bool has_best = false;       // false: torch's best = ±inf
  double best = 0.0;
  int64_t num_bad_epochs = 0;
  int64_t last_epoch = 0;
  bool operator==(const PlateauState&) const = default;
  nlohmann::json to_json() const;
  // Errors name `source` and the bad key.
  static PlateauState from_json(const nlohmann::json& j, const std::string& source);
};

class LrSchedule {
 public:
  // Validates (fail_usage naming the flag), resolves the defaults.
  explicit LrSchedule(SchedulerConfig config);
  const SchedulerConfig& config() const { return config_; }

  // lr after n completed updates = the lr of update n + 1. Only for schedules that do not
  // depend on the epoch (everything but fixed with several --lr values or --force-anneal).
  double lr_at(int64_t num_updates) const;
  // Same, for the given 1-based epoch (the epoch the next update belongs to).
  double lr_at_epoch(int64_t num_updates, int64_t epoch) const;
  bool depends_on_epoch() const;

  // reduce_lr_on_plateau (no-ops for the other kinds): the end of `epoch` after n updates, with
  // the validation metric fairseq passes (nullopt: no validation at the end of that epoch).
  void step_epoch(int64_t epoch, std::optional<double> metric, int64_t num_updates);
  const PlateauState& plateau() const { return plateau_; }
  void set_plateau(const PlateauState& state) { plateau_ = state; }

 private:
  double cosine(int64_t n) const;
  double tri_stage(int64_t n) const;
  double triangular(int64_t n) const;
  SchedulerConfig config_;
  int64_t warmup_ = 0;
  double warmup_init_ = 0.0;
  double lr_step_ = 0.0;   // warmup increment per update (cosine, inverse_sqrt)
  double period_ = 0.0;    // cosine
  double decay_factor_ = 0.0;  // inverse_sqrt; tri_stage's −ln(final_lr_scale)/Ds
  int64_t hold_ = 0, decay_ = 0;  // tri_stage (warmup_ is its Ws)
  double stepsize_ = 0.0;         // triangular: floor(P / 2)
  PlateauState plateau_{};        // reduce_lr_on_plateau
};

// fairseq's stop conditions (fairseq_cli/train.py): stop once num_updates ≥ max_update
// (max_update 0 = no limit), or, checked before an epoch starts, when lr ≤ stop_min_lr.
struct StopCriteria {
  int64_t max_update = 0;    // --max-update
  double stop_min_lr = -1;   // --stop-min-lr (fairseq default −1: never)
};
enum class StopReason { None, MaxUpdate, MinLr };
StopReason should_stop(const StopCriteria& criteria, int64_t num_updates, double lr);
const char* stop_reason_name(StopReason reason);

const char* scheduler_kind_name(SchedulerKind kind);
SchedulerKind parse_scheduler_kind(std::string_view name);  // fail_usage when unknown
// --phase-ratio's text as fairseq's command line takes a tuple: "(0.1, 0.4, 0.5)", "[0.1,0.4,0.5]"
// or "0.1,0.4,0.5"; fail_usage naming the flag unless it is 3 numbers.
std::array<double, 3> parse_phase_ratio(const std::string& text);

}  // namespace stretch::optim
