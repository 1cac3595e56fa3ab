// tests/optim/driver/optim_driver.cpp — runs one optimizer case for check_optim_torch.py.
// Usage: optim_driver CASE_DIR
//   CASE_DIR/case.json  {"optimizer": {"kind": "adam", "momentum": 0.9, "weight_decay": 0.01,
//                        "betas": [0.9, 0.999], "eps": 1e-8, "adagrad_clip": 0.5,
//                        "lr_decay": 0.0, "initial_accumulator_value": 0.0,
//                        adafactor: "adafactor_eps": [1e-30, 1e-3], "clip_threshold": 1.0,
//                        "decay_rate": -0.8, "beta1": 0.9, "scale_parameter": true,
//                        "relative_step": false, "warmup_init": false}   (all but kind optional)
//                        "params": [{"name": "a", "numel": 7, "shape": [7]}, ...]  (shape optional),
//                        "lrs": [lr per step]}
//                       or, instead of "lrs", a schedule and the epoch of each step:
//                        "schedule": {"kind": "fixed", "lr": [0.07], "warmup_updates": 7,
//                                     "force_anneal": 3, "lr_shrink": 0.5}   (all but kind, lr optional;
//                                     also max_update, lr_period_updates, warmup_steps, hold_steps,
//                                     decay_steps, phase_ratio, init_lr_scale, final_lr_scale, max_lr,
//                                     shrink_min: SchedulerConfig's fields)
//                                     reduce_lr_on_plateau: lr_threshold, lr_patience, maximize)
//                        "epochs": [1-based epoch of each step]   (step n+1 uses lr_at_epoch(n, epoch))
//                        "valid": [metric or null, per epoch]   (reduce_lr_on_plateau: step_epoch(epoch,
//                                  metric, n) after an epoch's last step; the state then goes through
//                                  its checkpoint JSON into a fresh schedule, as a resume does)
//   CASE_DIR/init.f32   initial values, params concatenated              [P] float32 LE
//   CASE_DIR/grads.f32  grads of every step                              [steps, P]
// Writes CASE_DIR/out.f32: the values after each step                    [steps, P]
//    and CASE_DIR/lrs.f64:  the lr of each step                             [steps] float64 LE
// Not part of test_optim (it lives in driver/, outside the test glob).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

using namespace stretch;
using namespace stretch::optim;

namespace {
std::vector<float> read_f32(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 4)))
    fail_input(path, "could not read " + std::to_string(n) + " floats");
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 2) fail_usage("usage: optim_driver CASE_DIR");
    const std::string dir = argv[1];
    std::ifstream cf(dir + "/case.json");
    const nlohmann::json c = nlohmann::json::parse(cf);
    const auto& o = c["optimizer"];
    OptimizerConfig cfg{.kind = parse_optimizer_kind(o["kind"].get<std::string>())};
    if (o.contains("momentum")) cfg.momentum = o["momentum"].get<double>();
    if (o.contains("weight_decay")) cfg.weight_decay = o["weight_decay"].get<double>();
    if (o.contains("betas")) cfg.beta1 = o["betas"][0].get<double>(), cfg.beta2 = o["betas"][1].get<double>();
    if (o.contains("eps")) cfg.eps = o["eps"].get<double>();
    if (o.contains("adagrad_clip")) cfg.adagrad_clip = o["adagrad_clip"].get<double>();
    if (o.contains("lr_decay")) cfg.lr_decay = o["lr_decay"].get<double>();
    if (o.contains("initial_accumulator_value")) cfg.initial_accumulator_value = o["initial_accumulator_value"].get<double>();
    if (o.contains("adafactor_eps")) cfg.adafactor_eps1 = o["adafactor_eps"][0].get<double>(), cfg.adafactor_eps2 = o["adafactor_eps"][1].get<double>();
    if (o.contains("clip_threshold")) cfg.clip_threshold = o["clip_threshold"].get<double>();
    if (o.contains("decay_rate")) cfg.decay_rate = o["decay_rate"].get<double>();
    if (o.contains("beta1") && !o["beta1"].is_null()) cfg.adafactor_beta1 = o["beta1"].get<double>();
    if (o.contains("scale_parameter")) cfg.scale_parameter = o["scale_parameter"].get<bool>();
    if (o.contains("relative_step")) cfg.relative_step = o["relative_step"].get<bool>();
    if (o.contains("warmup_init")) cfg.warmup_init = o["warmup_init"].get<bool>();
    auto opt = make_optimizer(cfg);

    size_t total = 0;
    for (const auto& p : c["params"]) total += p["numel"].get<size_t>();
    std::vector<double> lrs;
    if (c.contains("schedule")) {
      const auto& s = c["schedule"];
      SchedulerConfig sc{.kind = parse_scheduler_kind(s["kind"].get<std::string>()),
                         .lr = s["lr"].get<std::vector<double>>()};
      if (s.contains("warmup_updates")) sc.warmup_updates = s["warmup_updates"].get<int64_t>();
      if (s.contains("force_anneal")) sc.force_anneal = s["force_anneal"].get<int64_t>();
      if (s.contains("lr_shrink")) sc.lr_shrink = s["lr_shrink"].get<double>();
      if (s.contains("max_update")) sc.max_update = s["max_update"].get<int64_t>();
      if (s.contains("lr_period_updates")) sc.lr_period_updates = s["lr_period_updates"].get<double>();
      if (s.contains("warmup_steps")) sc.warmup_steps = s["warmup_steps"].get<int64_t>();
      if (s.contains("hold_steps")) sc.hold_steps = s["hold_steps"].get<int64_t>();
      if (s.contains("decay_steps")) sc.decay_steps = s["decay_steps"].get<int64_t>();
      if (s.contains("phase_ratio")) sc.phase_ratio = s["phase_ratio"].get<std::array<double, 3>>();
      if (s.contains("init_lr_scale")) sc.init_lr_scale = s["init_lr_scale"].get<double>();
      if (s.contains("final_lr_scale")) sc.final_lr_scale = s["final_lr_scale"].get<double>();
      if (s.contains("max_lr")) sc.max_lr = s["max_lr"].get<double>();
      if (s.contains("shrink_min")) sc.shrink_min = s["shrink_min"].get<bool>();
      if (s.contains("lr_deacy_period")) sc.lr_deacy_period = s["lr_deacy_period"].get<int64_t>();
      if (s.contains("lr_decay")) sc.lr_decay = s["lr_decay"].get<double>();
      if (s.contains("min_lr")) sc.min_lr = s["min_lr"].get<double>();
      if (s.contains("warmup_init_lr")) sc.warmup_init_lr = s["warmup_init_lr"].get<double>();
      if (s.contains("lr_threshold")) sc.lr_threshold = s["lr_threshold"].get<double>();
      if (s.contains("lr_patience")) sc.lr_patience = s["lr_patience"].get<int64_t>();
      if (s.contains("maximize")) sc.maximize = s["maximize"].get<bool>();
      auto sched = std::make_unique<LrSchedule>(sc);
      const auto epochs = c["epochs"].get<std::vector<int64_t>>();
      for (size_t n = 0; n < epochs.size(); ++n) {
        lrs.push_back(sched->lr_at_epoch(static_cast<int64_t>(n), epochs[n]));
        const bool epoch_ends = n + 1 == epochs.size() || epochs[n + 1] != epochs[n];
        if (!epoch_ends || !c.contains("valid")) continue;
        const auto& v = c["valid"].at(static_cast<size_t>(epochs[n] - 1));
        sched->step_epoch(epochs[n], v.is_null() ? std::nullopt : std::optional<double>(v.get<double>()),
                          static_cast<int64_t>(n + 1));
        const std::string saved = sched->plateau().to_json().dump();
        sched = std::make_unique<LrSchedule>(sc);
        sched->set_plateau(PlateauState::from_json(nlohmann::json::parse(saved), "plateau state"));
      }
    } else {
      lrs = c["lrs"].get<std::vector<double>>();
    }
    std::vector<float> values = read_f32(dir + "/init.f32", total);
    const std::vector<float> grads = read_f32(dir + "/grads.f32", total * lrs.size());
    std::vector<float> grad(total), out;
    std::vector<OptimParam> params;
    size_t off = 0;
    for (const auto& p : c["params"]) {
      const int64_t n = p["numel"].get<int64_t>();
      std::vector<int64_t> shape;
      if (p.contains("shape")) shape = p["shape"].get<std::vector<int64_t>>();
      params.push_back({p["name"].get<std::string>(), values.data() + off, grad.data() + off, n, shape});
      off += static_cast<size_t>(n);
    }
    for (size_t t = 0; t < lrs.size(); ++t) {
      std::copy(grads.begin() + t * total, grads.begin() + (t + 1) * total, grad.begin());
      opt->step(params, lrs[t]);
      out.insert(out.end(), values.begin(), values.end());
    }
    std::ofstream of(dir + "/out.f32", std::ios::binary);
    of.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
    if (!of) fail_io(dir + "/out.f32", "could not write");
    std::ofstream lf(dir + "/lrs.f64", std::ios::binary);
    lf.write(reinterpret_cast<const char*>(lrs.data()), static_cast<std::streamsize>(lrs.size() * 8));
    if (!lf) fail_io(dir + "/lrs.f64", "could not write");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "optim_driver: error: " << e.what() << "\n";
    return 1;
  }
}
