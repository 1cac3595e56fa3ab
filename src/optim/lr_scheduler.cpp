// optim/lr_scheduler.cpp — fairseq's lr schedules as pure functions (see lr_scheduler.h).
// Each formula keeps fairseq's operation order so the doubles match Python's bit for bit
// where the same libm is used (Python's x ** y and math.log(x, b) are C pow and log/log).
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "core/error.h"

namespace stretch::optim {

namespace {

struct KindName {
  SchedulerKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {SchedulerKind::Fixed, "fixed"},
    {SchedulerKind::InverseSqrt, "inverse_sqrt"},
    {SchedulerKind::Cosine, "cosine"},
    {SchedulerKind::PolynomialDecay, "polynomial_decay"},
    {SchedulerKind::TriStage, "tri_stage"},
    {SchedulerKind::Triangular, "triangular"},
    {SchedulerKind::ReduceLrOnPlateau, "reduce_lr_on_plateau"},
    {SchedulerKind::Step, "step"},
};
static_assert(std::size(kKindNames) == kSchedulerKindCount, "every SchedulerKind needs a name");

[[noreturn]] void bad(const std::string& flag, double v, const std::string& rule, const std::string& hint = "") {
  std::ostringstream os;
  os << flag << " " << v << ": " << rule;
  fail_usage(os.str(), hint);
}

}  // namespace

const char* scheduler_kind_name(SchedulerKind kind) {
  for (const auto& k : kKindNames)
    if (k.kind == kind) return k.name;
  return "?";
}

SchedulerKind parse_scheduler_kind(std::string_view name) {
  for (const auto& k : kKindNames)
    if (name == k.name) return k.kind;
  std::string known;
  for (const auto& k : kKindNames) known += (known.empty() ? "" : ", ") + std::string(k.name);
  fail_usage("--lr-scheduler " + std::string(name) + ": unknown or not supported by stretch",
             "use one of: " + known);
}

std::array<double, 3> parse_phase_ratio(const std::string& text) {
  std::string t = text;
  for (char& ch : t)
    if (ch == '(' || ch == ')' || ch == '[' || ch == ']' || ch == ',') ch = ' ';
  std::istringstream is(t);
  std::array<double, 3> r{};
  std::string extra;
  if (!(is >> r[0] >> r[1] >> r[2]) || (is >> extra))
    fail_usage("--phase-ratio '" + text + "': expected 3 numbers (warmup, hold, decay fractions of --max-update)",
               "e.g. --phase-ratio '(0.1, 0.4, 0.5)'");
  return r;
}

LrSchedule::LrSchedule(SchedulerConfig c) : config_(std::move(c)) {
  const SchedulerConfig& c_ = config_;
  const char* kname = scheduler_kind_name(c_.kind);
  if (c_.lr.empty()) fail_usage("--lr: no learning rate given");
  for (double v : c_.lr)
    if (!std::isfinite(v) || v < 0) bad("--lr", v, "must be finite and >= 0");
  if (c_.lr.size() > 1 && c_.kind != SchedulerKind::Fixed)
    fail_usage(std::string("--lr has ") + std::to_string(c_.lr.size()) + " values, but --lr-scheduler " + kname +
                   " takes one", "give one --lr, or use --lr-scheduler fixed for one lr per epoch");
  warmup_ = c_.warmup_updates.value_or(c_.kind == SchedulerKind::InverseSqrt ? 4000 : 0);
  if (warmup_ < 0) bad("--warmup-updates", static_cast<double>(warmup_), "must be >= 0");
  if (c_.force_anneal && c_.kind != SchedulerKind::Fixed)
    fail_usage(std::string("--force-anneal is not supported with --lr-scheduler ") + kname,
               "use --lr-scheduler fixed with --force-anneal, or drop the flag");
  if (c_.force_anneal && *c_.force_anneal < 1) bad("--force-anneal", static_cast<double>(*c_.force_anneal), "must be >= 1 (epochs start at 1)");
  const double lr = c_.lr[0];

  switch (c_.kind) {
    case SchedulerKind::Fixed:
      if (!std::isfinite(c_.lr_shrink) || c_.lr_shrink < 0) bad("--lr-shrink", c_.lr_shrink, "must be finite and >= 0");
      break;
    case SchedulerKind::InverseSqrt:
      if (warmup_ <= 0)
        bad("--warmup-updates", static_cast<double>(warmup_), "must be > 0 with --lr-scheduler inverse_sqrt",
            "fairseq divides by it too; e.g. --warmup-updates 4000");
      warmup_init_ = c_.warmup_init_lr < 0 ? 0.0 : c_.warmup_init_lr;
      lr_step_ = (lr - warmup_init_) / static_cast<double>(warmup_);
      decay_factor_ = lr * std::pow(static_cast<double>(warmup_), 0.5);
      break;
    case SchedulerKind::Cosine:
      if (!(lr > c_.min_lr)) {
        std::ostringstream os;
        os << "--lr " << lr << " must be more than --min-lr " << c_.min_lr << " with --lr-scheduler cosine";
        fail_usage(os.str());
      }
      if (!std::isfinite(c_.t_mult) || c_.t_mult <= 0) bad("--t-mult", c_.t_mult, "must be > 0");
      if (!std::isfinite(c_.lr_shrink) || c_.lr_shrink < 0) bad("--lr-shrink", c_.lr_shrink, "must be finite and >= 0");
      warmup_init_ = c_.warmup_init_lr < 0 ? c_.min_lr : c_.warmup_init_lr;
      period_ = c_.lr_period_updates;
      if (period_ <= 0) {
        if (c_.max_update <= 0)
          fail_usage("--lr-scheduler cosine needs --lr-period-updates or --max-update",
                     "e.g. --lr-period-updates 270000, or --max-update 286000 (period = max_update − warmup)");
        period_ = static_cast<double>(c_.max_update - warmup_);
        if (period_ <= 0)
          bad("--max-update", static_cast<double>(c_.max_update), "must exceed --warmup-updates when it sets the cosine period");
      }
      lr_step_ = warmup_ > 0 ? (lr - warmup_init_) / static_cast<double>(warmup_) : 1.0;
      break;
    case SchedulerKind::PolynomialDecay:
      if (!std::isfinite(c_.power)) bad("--power", c_.power, "must be finite");
      if (!std::isfinite(c_.end_learning_rate) || c_.end_learning_rate < 0)
        bad("--end-learning-rate", c_.end_learning_rate, "must be finite and >= 0");
      if (c_.total_num_update <= warmup_)
        bad("--total-num-update", static_cast<double>(c_.total_num_update), "must exceed --warmup-updates");
      break;
    case SchedulerKind::TriStage: {
      if (warmup_ > 0)
        fail_usage("--warmup-updates is not a tri_stage flag (fairseq rejects it too)",
                   "tri_stage warms up over --warmup-steps N (or the first --phase-ratio)");
      if (!std::isfinite(c_.init_lr_scale) || c_.init_lr_scale < 0) bad("--init-lr-scale", c_.init_lr_scale, "must be finite and >= 0");
      if (!std::isfinite(c_.final_lr_scale) || c_.final_lr_scale <= 0)
        bad("--final-lr-scale", c_.final_lr_scale, "must be finite and > 0 (the decay is exponential towards it)");
      if (c_.phase_ratio) {
        const auto& r = *c_.phase_ratio;
        if (c_.max_update <= 0)
          fail_usage("--phase-ratio needs --max-update (the phases are fractions of it)",
                     "give --max-update N, or --warmup-steps/--hold-steps/--decay-steps");
        for (double v : r)
          if (!std::isfinite(v) || v < 0) bad("--phase-ratio", v, "each ratio must be finite and >= 0");
        if (0.0 + r[0] + r[1] + r[2] != 1.0) {
          std::ostringstream os;
          os << "--phase-ratio (" << r[0] << ", " << r[1] << ", " << r[2] << "): the ratios must add up to 1 (fairseq asserts it)";
          fail_usage(os.str());
        }
        const double m = static_cast<double>(c_.max_update);
        warmup_ = static_cast<int64_t>(m * r[0]);  // Python's int(): truncation
        hold_ = static_cast<int64_t>(m * r[1]);
        decay_ = static_cast<int64_t>(m * r[2]);
      } else {
        warmup_ = c_.warmup_steps;
        hold_ = c_.hold_steps;
        decay_ = c_.decay_steps;
        if (warmup_ < 0) bad("--warmup-steps", static_cast<double>(warmup_), "must be >= 0");
        if (hold_ < 0) bad("--hold-steps", static_cast<double>(hold_), "must be >= 0");
      }
      if (decay_ <= 0)
        bad(c_.phase_ratio ? "--phase-ratio's decay steps" : "--decay-steps", static_cast<double>(decay_),
            "must be > 0 with --lr-scheduler tri_stage (fairseq divides by it)",
            "e.g. --decay-steps 1000, or --phase-ratio '(0.1, 0.4, 0.5)' with --max-update");
      warmup_init_ = c_.init_lr_scale * lr;
      lr_step_ = warmup_ != 0 ? (lr - warmup_init_) / static_cast<double>(warmup_) : 0.0;
      decay_factor_ = -std::log(c_.final_lr_scale) / static_cast<double>(decay_);
      break;
    }
    case SchedulerKind::Triangular: {
      if (warmup_ > 0)
        fail_usage("--warmup-updates is not a triangular flag (fairseq rejects it too)",
                   "the triangular schedule starts at --lr and rises to --max-lr over half of --lr-period-updates");
      if (c_.max_lr < 0)
        fail_usage("--lr-scheduler triangular needs --max-lr (fairseq has no default for it)",
                   "e.g. --lr 0.0001 --max-lr 0.001");
      if (!std::isfinite(c_.max_lr) || !(c_.max_lr > lr)) {
        std::ostringstream os;
        os << "--max-lr " << c_.max_lr << " must be more than --lr " << lr << " with --lr-scheduler triangular";
        fail_usage(os.str());
      }
      if (!std::isfinite(c_.lr_shrink) || c_.lr_shrink < 0) bad("--lr-shrink", c_.lr_shrink, "must be finite and >= 0");
      const double period = c_.lr_period_updates < 0 ? 5000.0 : c_.lr_period_updates;  // fairseq's default
      stepsize_ = std::floor(period / 2.0);
      if (stepsize_ <= 0)
        bad("--lr-period-updates", period, "must be >= 2 with --lr-scheduler triangular (half of it is the step size)");
      break;
    }
    case SchedulerKind::Step:
      // fairseq's StepLRSchedule asserts, as usage errors.
      if (c_.lr_deacy_period <= 0)
        bad("--lr-deacy-period", static_cast<double>(c_.lr_deacy_period), "must be > 0 with --lr-scheduler step",
            "fairseq's spelling: --lr-deacy-period (updates between decays; default 25000)");
      if (!std::isfinite(c_.lr_decay) || c_.lr_decay > 1) bad("--lr-decay", c_.lr_decay, "must be finite and <= 1");
      if (!std::isfinite(c_.min_lr) || c_.min_lr < 0) bad("--min-lr", c_.min_lr, "must be finite and >= 0");
      if (!(lr > c_.min_lr)) {
        std::ostringstream os;
        os << "--lr " << lr << " must be more than --min-lr " << c_.min_lr << " with --lr-scheduler step";
        fail_usage(os.str());
      }
      warmup_init_ = c_.warmup_init_lr >= 0 ? c_.warmup_init_lr : c_.min_lr;
      lr_step_ = warmup_ > 0 ? (lr - warmup_init_) / static_cast<double>(warmup_) : 1.0;
      break;
    case SchedulerKind::ReduceLrOnPlateau:
      // torch's ReduceLROnPlateau refuses factor >= 1; patience and threshold as torch takes them.
      if (!std::isfinite(c_.lr_shrink) || c_.lr_shrink < 0 || c_.lr_shrink >= 1)
        bad("--lr-shrink", c_.lr_shrink, "must be in [0, 1) with --lr-scheduler reduce_lr_on_plateau",
            "torch's ReduceLROnPlateau refuses a factor >= 1; e.g. --lr-shrink 0.5");
      if (!std::isfinite(c_.lr_threshold) || c_.lr_threshold < 0)
        bad("--lr-threshold", c_.lr_threshold, "must be finite and >= 0");
      if (c_.lr_patience < 0) bad("--lr-patience", static_cast<double>(c_.lr_patience), "must be >= 0");
      warmup_init_ = c_.warmup_init_lr < 0 ? (warmup_ > 0 ? 0.0 : lr) : c_.warmup_init_lr;
      if (warmup_ > 0) lr_step_ = (lr - warmup_init_) / static_cast<double>(warmup_);
      break;
  }
}

nlohmann::json PlateauState::to_json() const {
  // JSON has no NaN or inf: an unset lr or best is null.
  return {{"lr", std::isfinite(lr) ? nlohmann::json(lr) : nlohmann::json()},
          {"best", has_best && std::isfinite(best) ? nlohmann::json(best) : nlohmann::json()},
          {"num_bad_epochs", num_bad_epochs},
          {"last_epoch", last_epoch}};
}

PlateauState PlateauState::from_json(const nlohmann::json& j, const std::string& source) {
  PlateauState s;
  auto number = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key))
      fail_input(source, std::string("lr_plateau has no key '") + key + "'", "restore an earlier checkpoint");
    const nlohmann::json& v = j.at(key);
    if (!v.is_null() && !v.is_number())
      fail_input(source, std::string("lr_plateau key '") + key + "' is " + v.dump() + ", not a number",
                 "restore an earlier checkpoint");
    return v;
  };
  if (const auto& v = number("lr"); !v.is_null()) s.lr = v.get<double>();
  if (const auto& v = number("best"); !v.is_null()) s.has_best = true, s.best = v.get<double>();
  const auto& bad_epochs = number("num_bad_epochs");
  const auto& last = number("last_epoch");
  if (bad_epochs.is_null() || last.is_null() || bad_epochs.get<int64_t>() < 0 || last.get<int64_t>() < 0 ||
      (!std::isnan(s.lr) && !(s.lr >= 0)))
    fail_input(source, "lr_plateau " + j.dump() + " is impossible", "restore an earlier checkpoint");
  s.num_bad_epochs = bad_epochs.get<int64_t>();
  s.last_epoch = last.get<int64_t>();
  return s;
}

void LrSchedule::step_epoch(int64_t epoch, std::optional<double> metric, int64_t num_updates) {
  if (config_.kind != SchedulerKind::ReduceLrOnPlateau) return;
  PlateauState& s = plateau_;
  // fairseq's warmup_end turns true at the first step_update(n) with n > W.
  const bool warmup_end = warmup_ <= 0 || num_updates > warmup_;
  if (!metric || !warmup_end) {
    s.last_epoch = epoch;
    return;
  }
  // torch.optim.lr_scheduler.ReduceLROnPlateau.step(metrics), torch 1.13.
  const double current = *metric;
  s.last_epoch += 1;
  const double inf = std::numeric_limits<double>::infinity();
  const double best = s.has_best ? s.best : (config_.maximize ? -inf : inf);
  const bool better = config_.maximize ? current > best * (config_.lr_threshold + 1.0)
                                       : current < best * (1.0 - config_.lr_threshold);
  if (better) {
    s.best = current;
    s.has_best = true;
    s.num_bad_epochs = 0;
  } else {
    s.num_bad_epochs += 1;
  }
  if (s.num_bad_epochs > config_.lr_patience) {
    const double old_lr = lr_at(num_updates);
    const double new_lr = std::max(old_lr * config_.lr_shrink, 0.0);
    if (old_lr - new_lr > 1e-8) s.lr = new_lr;
    s.num_bad_epochs = 0;
  }
}

bool LrSchedule::depends_on_epoch() const {
  return config_.kind == SchedulerKind::Fixed && (config_.lr.size() > 1 || config_.force_anneal.has_value());
}

double LrSchedule::lr_at(int64_t num_updates) const {
  STRETCH_CHECK(!depends_on_epoch(), "this fixed schedule depends on the epoch: call lr_at_epoch");
  return lr_at_epoch(num_updates, 1);
}

double LrSchedule::cosine(int64_t num_updates) const {
  const SchedulerConfig& c = config_;
  const double max_lr = c.lr[0];
  const double n = static_cast<double>(num_updates);
  if (num_updates < warmup_) return warmup_init_ + n * lr_step_;
  const double curr = n - static_cast<double>(warmup_);
  double i, t_i, t_curr;
  if (c.t_mult != 1.0) {
    i = std::floor(std::log(1.0 - curr / period_ * (1.0 - c.t_mult)) / std::log(c.t_mult));
    t_i = std::pow(c.t_mult, i) * period_;
    t_curr = curr - (1.0 - std::pow(c.t_mult, i)) / (1.0 - c.t_mult) * period_;
  } else {
    i = std::floor(curr / period_);
    t_i = period_;
    t_curr = curr - (period_ * i);
  }
  const double shrink = std::pow(c.lr_shrink, i);
  const double lo = c.min_lr * shrink;
  const double hi = max_lr * shrink;
  return lo + 0.5 * (hi - lo) * (1.0 + std::cos(std::numbers::pi * t_curr / t_i));
}

double LrSchedule::tri_stage(int64_t n) const {
  // fairseq _decide_stage then step_update.
  const double peak = config_.lr[0];
  if (n < warmup_) return warmup_init_ + lr_step_ * static_cast<double>(n);
  int64_t offset = warmup_;
  if (n < offset + hold_) return peak;
  offset += hold_;
  if (n <= offset + decay_) return peak * std::exp(-decay_factor_ * static_cast<double>(n - offset));
  return config_.final_lr_scale * peak;
}

double LrSchedule::triangular(int64_t num_updates) const {
  const SchedulerConfig& c = config_;
  const double n = static_cast<double>(num_updates);
  const double cycle = std::floor(n / (2.0 * stepsize_));
  const double shrink = std::pow(c.lr_shrink, cycle);
  const double max_lr = c.max_lr * shrink;
  const double min_lr = c.shrink_min ? c.lr[0] * shrink : c.lr[0];
  const double x = std::abs(n / stepsize_ - 2.0 * (cycle + 1.0) + 1.0);
  return min_lr + (max_lr - min_lr) * std::max(0.0, 1.0 - x);
}

double LrSchedule::lr_at_epoch(int64_t num_updates, int64_t epoch) const {
  STRETCH_CHECK(num_updates >= 0, "num_updates " << num_updates);
  STRETCH_CHECK(epoch >= 1, "epoch " << epoch << " (epochs start at 1)");
  const SchedulerConfig& c = config_;
  const double n = static_cast<double>(num_updates);
  switch (c.kind) {
    case SchedulerKind::Fixed: {
      // fairseq fixed_schedule.get_next_lr (step_begin_epoch) then step_update.
      double base;
      if (!c.force_anneal || epoch < *c.force_anneal) {
        const size_t k = static_cast<size_t>(std::min<int64_t>(epoch - 1, static_cast<int64_t>(c.lr.size()) - 1));
        base = c.lr[k];
      } else {
        base = c.lr.back() * std::pow(c.lr_shrink, static_cast<double>(epoch + 1 - *c.force_anneal));
      }
      if (warmup_ > 0 && num_updates < warmup_) {
        const double factor = (n + 1.0) / static_cast<double>(warmup_);
        return factor * base;
      }
      return base;
    }
    case SchedulerKind::InverseSqrt:
      if (num_updates < warmup_) return warmup_init_ + n * lr_step_;
      return decay_factor_ * std::pow(n, -0.5);
    case SchedulerKind::Cosine:
      return cosine(num_updates);
    case SchedulerKind::PolynomialDecay: {
      const double lr = c.lr[0];
      if (warmup_ > 0 && num_updates <= warmup_) {
        const double factor = n / static_cast<double>(warmup_);
        return factor * lr;
      }
      if (num_updates >= c.total_num_update) return c.end_learning_rate;
      const double w = static_cast<double>(warmup_);
      const double range = lr - c.end_learning_rate;
      const double pct_remaining = 1.0 - (n - w) / (static_cast<double>(c.total_num_update) - w);
      return range * std::pow(pct_remaining, c.power) + c.end_learning_rate;
    }
    case SchedulerKind::TriStage:
      return tri_stage(num_updates);
    case SchedulerKind::Triangular:
      return triangular(num_updates);
    case SchedulerKind::Step: {
      // fairseq: warmup_init_lr + num_updates * warmup_lr_step; lr_decay ** (curr // period) is a
      // float to an int power (C pow), then max(max_lr * mult, min_lr).
      if (num_updates < warmup_) return warmup_init_ + n * lr_step_;
      const int64_t decays = (num_updates - warmup_) / c.lr_deacy_period;
      return std::max(c.lr[0] * std::pow(c.lr_decay, static_cast<double>(decays)), c.min_lr);
    }
    case SchedulerKind::ReduceLrOnPlateau:
      // fairseq's step_update sets the lr only while n ≤ W; after, the optimizer keeps it.
      if (warmup_ > 0 && num_updates <= warmup_) return warmup_init_ + n * lr_step_;
      if (!std::isnan(plateau_.lr)) return plateau_.lr;
      return warmup_ > 0 ? warmup_init_ + static_cast<double>(warmup_) * lr_step_ : c.lr[0];
  }
  return 0.0;
}

StopReason should_stop(const StopCriteria& s, int64_t num_updates, double lr) {
  if (s.max_update > 0 && num_updates >= s.max_update) return StopReason::MaxUpdate;
  if (lr <= s.stop_min_lr) return StopReason::MinLr;
  return StopReason::None;
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::None: return "none";
    case StopReason::MaxUpdate: return "max_update";
    case StopReason::MinLr: return "stop_min_lr";
  }
  return "?";
}

}  // namespace stretch::optim
