// optim/optimizer.cpp — the Optimizer base (per-name state, state dict save/load with
// validation), the factory with config validation, and the fairseq flag parsers.
#include "optim/optimizer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "optim/grad_clip.h"
#include "optim/optimizer_impl.h"

namespace stretch::optim {

namespace {

constexpr int kStateFormatVersion = 1;

struct KindName {
  OptimizerKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {OptimizerKind::Nag, "nag"},         {OptimizerKind::Sgd, "sgd"},
    {OptimizerKind::Adam, "adam"},       {OptimizerKind::AdamW, "adamw"},
    {OptimizerKind::Adagrad, "adagrad"}, {OptimizerKind::AdagradWithGradClip, "adagrad_with_grad_clip"},
    {OptimizerKind::Adafactor, "adafactor"},
};
static_assert(std::size(kKindNames) == kOptimizerKindCount, "every OptimizerKind needs a name");

std::string known_kind_names() {
  std::string s;
  for (const auto& k : kKindNames) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Optimizer base

std::vector<Optimizer::SlotSpec> Optimizer::slot_layout(const OptimParam& p) const {
  std::vector<SlotSpec> out;
  for (auto& n : slot_names()) out.push_back({n, p.numel});
  return out;
}

Optimizer::ParamState& Optimizer::state_for(const OptimParam& p) {
  auto [it, fresh] = state_.try_emplace(p.name);
  ParamState& st = it->second;
  const auto layout = slot_layout(p);
  STRETCH_CHECK(layout.size() <= std::size(st.slot), "optimizer: " << layout.size() << " state slots");
  if (fresh) {
    st.numel = p.numel;
    for (size_t s = 0; s < layout.size(); ++s) {
      st.slot_name.push_back(layout[s].name);
      st.slot[s] = Tensor::empty({layout[s].numel});
      const float init = slot_init(static_cast<int>(s));
      if (init == 0.0f) st.slot[s].zero_(); else st.slot[s].fill_(init);
    }
  }
  STRETCH_CHECK(st.numel == p.numel, "parameter '" << p.name << "' has " << p.numel
                                                   << " elements but its optimizer state has " << st.numel);
  for (size_t s = 0; s < layout.size(); ++s)
    STRETCH_CHECK(s < st.slot_name.size() && st.slot_name[s] == layout[s].name && st.slot[s].numel() == layout[s].numel,
                  "parameter '" << p.name << "': its optimizer state slot '" << layout[s].name
                                << "' does not fit its shape (the shape changed between steps)");
  STRETCH_CHECK(st.last_call != calls_, "parameter '" << p.name << "' passed twice to one optimizer step "
                                                      "(pass a tied parameter once)");
  st.last_call = calls_;
  return st;
}

void Optimizer::step(std::span<const OptimParam> params, double lr, double grad_factor) {
  STRETCH_CHECK(std::isfinite(lr) && lr >= 0.0, "learning rate " << lr << " (must be finite and >= 0)");
  STRETCH_CHECK(std::isfinite(grad_factor), "gradient factor " << grad_factor << " (must be finite)");
  grad_factor_ = 1.0f;
  if (grad_factor != 1.0) {
    if (scales_grads_in_update()) grad_factor_ = static_cast<float>(grad_factor);
    else multiply_grads(params, grad_factor);
  }
  ++calls_;
  begin_step(lr);
  for (const OptimParam& p : params) {
    STRETCH_CHECK(!p.name.empty(), "an optimizer parameter has no name");
    STRETCH_CHECK(p.numel >= 0, "parameter '" << p.name << "' numel " << p.numel);
    STRETCH_CHECK(p.numel == 0 || (p.value && p.grad), "parameter '" << p.name << "' has a null value or grad");
    ParamState& st = state_for(p);
    ++st.step;
    if (p.numel > 0) update(p, st, lr);
  }
  end_step(lr);
}

int64_t Optimizer::step_count(const std::string& name) const {
  auto it = state_.find(name);
  return it == state_.end() ? 0 : it->second.step;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& [name, st] : state_) {
    steps[name] = st.step;
    for (size_t s = 0; s < st.slot_name.size(); ++s) out.tensors.emplace_back(name + "." + st.slot_name[s], st.slot[s]);
  }
  out.scalars = {{"optimizer", optimizer_kind_name(kind())}, {"version", kStateFormatVersion}, {"steps", steps}};
  // The hyperparameters are recorded for the reader; on load the current config wins
  // (fairseq's optimizer overrides).
  out.scalars["config"] = {{"weight_decay", config_.weight_decay}};
  save_scalars(out.scalars);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& in, std::span<const OptimParam> params) {
  const std::string& src = in.source;
  const nlohmann::json& sc = in.scalars;
  const std::string reset_hint = "start the optimizer afresh with --reset-optimizer, or resume with the "
                                 "--optimizer and model the checkpoint was written with";
  if (!sc.is_object() || !sc.contains("optimizer") || !sc["optimizer"].is_string())
    fail_input(src, "optimizer state has no \"optimizer\" name", reset_hint);
  const std::string saved_kind = sc["optimizer"].get<std::string>();
  if (saved_kind != optimizer_kind_name(kind()))
    fail_input(src, "optimizer state is for '" + saved_kind + "' but the optimizer is '" +
                        optimizer_kind_name(kind()) + "'", reset_hint);
  if (!sc.contains("version") || !sc["version"].is_number_integer() || sc["version"].get<int>() != kStateFormatVersion)
    fail_input(src, "optimizer state version " + (sc.contains("version") ? sc["version"].dump() : std::string("(missing)")) +
                        " is not " + std::to_string(kStateFormatVersion), reset_hint);
  if (!sc.contains("steps") || !sc["steps"].is_object())
    fail_input(src, "optimizer state has no \"steps\" object", reset_hint);
  const nlohmann::json& steps = sc["steps"];

  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : in.tensors) {
    if (!by_name.emplace(name, &t).second) fail_input(src, "optimizer state tensor '" + name + "' appears twice", reset_hint);
  }

  std::map<std::string, ParamState> fresh;
  if (!steps.empty() || !by_name.empty()) {
    std::set<std::string> used;
    for (const OptimParam& p : params) {
      if (!steps.contains(p.name))
        fail_input(src, "optimizer state has no entry for parameter '" + p.name + "'", reset_hint);
      const auto& js = steps[p.name];
      if (!js.is_number_integer() || js.get<int64_t>() < 1)
        fail_input(src, "optimizer state step count of '" + p.name + "' is " + js.dump() + " (must be an integer >= 1)", reset_hint);
      if (fresh.count(p.name)) fail_input(src, "parameter '" + p.name + "' is listed twice", reset_hint);
      ParamState st;
      st.step = js.get<int64_t>();
      st.numel = p.numel;
      const auto slots = slot_layout(p);
      for (size_t s = 0; s < slots.size(); ++s) {
        const std::string tname = p.name + "." + slots[s].name;
        const int64_t want = slots[s].numel;
        auto it = by_name.find(tname);
        if (it == by_name.end()) fail_input(src, "optimizer state tensor '" + tname + "' is missing", reset_hint);
        const Tensor& t = *it->second;
        if (!t.defined() || t.dtype() != DType::F32 || t.numel() != want)
          fail_input(src, "optimizer state tensor '" + tname + "' is " +
                              (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().str() : std::string("undefined")) +
                              " but parameter '" + p.name + "' needs F32 with " + std::to_string(want) + " elements",
                     reset_hint);
        st.slot_name.push_back(slots[s].name);
        st.slot[s] = Tensor::empty({want});
        st.slot[s].copy_from(t.view({want}));
        used.insert(tname);
      }
      fresh.emplace(p.name, std::move(st));
    }
    for (const auto& [name, js] : steps.items())
      if (!fresh.count(name))
        fail_input(src, "optimizer state has parameter '" + name + "' that the model does not have", reset_hint);
    for (const auto& [name, t] : by_name)
      if (!used.count(name)) fail_input(src, "optimizer state has unexpected tensor '" + name + "'", reset_hint);
  }
  load_scalars(sc, src);  // may throw; state_ is replaced only after everything validated
  state_ = std::move(fresh);
}

// ---------------------------------------------------------------------------------------
// Factory and parsers

const char* optimizer_kind_name(OptimizerKind kind) {
  for (const auto& k : kKindNames)
    if (k.kind == kind) return k.name;
  return "?";
}

OptimizerKind parse_optimizer_kind(std::string_view name) {
  for (const auto& k : kKindNames)
    if (name == k.name) return k.kind;
  fail_usage("--optimizer " + std::string(name) + ": unknown optimizer", "use one of: " + known_kind_names());
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c) {
  auto need = [](bool ok, const std::string& flag, double v, const std::string& rule) {
    if (!ok) {
      std::ostringstream os;
      os << flag << " " << v << ": must be " << rule;
      fail_usage(os.str());
    }
  };
  need(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "--weight-decay", c.weight_decay, "finite and >= 0");
  if (c.momentum) need(*c.momentum >= 0 && *c.momentum < 1, "--momentum", *c.momentum, "in [0, 1)");
  if (c.eps) need(std::isfinite(*c.eps) && *c.eps >= 0, "--adam-eps", *c.eps, "finite and >= 0");
  switch (c.kind) {
    case OptimizerKind::Nag: return detail::make_nag(c);
    case OptimizerKind::Sgd: return detail::make_sgd(c);
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW:
      need(c.beta1 >= 0 && c.beta1 < 1, "--adam-betas beta1", c.beta1, "in [0, 1)");
      need(c.beta2 >= 0 && c.beta2 < 1, "--adam-betas beta2", c.beta2, "in [0, 1)");
      return detail::make_adam(c);
    case OptimizerKind::Adagrad:
    case OptimizerKind::AdagradWithGradClip:
      need(std::isfinite(c.adagrad_clip) && c.adagrad_clip >= 0, "--adagrad-clip", c.adagrad_clip, "finite and >= 0");
      need(std::isfinite(c.lr_decay) && c.lr_decay >= 0, "adagrad lr_decay", c.lr_decay, "finite and >= 0");
      need(std::isfinite(c.initial_accumulator_value) && c.initial_accumulator_value >= 0,
           "adagrad initial_accumulator_value", c.initial_accumulator_value, "finite and >= 0");
      if (c.kind == OptimizerKind::Adagrad && c.adagrad_clip != 0)
        fail_usage("--adagrad-clip is only used by --optimizer adagrad_with_grad_clip");
      return detail::make_adagrad(c);
    case OptimizerKind::Adafactor:
      // fairseq's Adafactor.__init__ refuses warmup_init without relative_step; the others are
      // values fairseq would take and turn into NaN or a division by zero.
      need(std::isfinite(c.adafactor_eps1) && c.adafactor_eps1 >= 0, "--adafactor-eps eps1", c.adafactor_eps1,
           "finite and >= 0 (it is added to g^2)");
      need(std::isfinite(c.adafactor_eps2) && c.adafactor_eps2 >= 0, "--adafactor-eps eps2", c.adafactor_eps2,
           "finite and >= 0 (the floor of the parameter RMS)");
      need(std::isfinite(c.clip_threshold) && c.clip_threshold > 0, "--clip-threshold", c.clip_threshold,
           "finite and > 0 (the bound of the update's RMS)");
      need(std::isfinite(c.decay_rate) && c.decay_rate < 0, "--decay-rate", c.decay_rate,
           "< 0 (beta2 of step t is 1 - t^decay_rate; fairseq's default -0.8)");
      if (c.adafactor_beta1)
        need(*c.adafactor_beta1 >= 0 && *c.adafactor_beta1 < 1, "--beta1", *c.adafactor_beta1,
             "in [0, 1) (leave it out for no first moment)");
      if (c.warmup_init && !c.relative_step)
        fail_usage("--warmup-init requires --relative-step (fairseq: \"warmup_init requires relative_step=True\")",
                   "add --relative-step, or drop --warmup-init");
      return detail::make_adafactor(c);
  }
  fail_usage("unknown optimizer kind");
}

std::vector<double> parse_float_list(std::string_view flag, std::string_view text) {
  std::string s = trim(text);
  if (s.size() >= 2 && ((s.front() == '(' && s.back() == ')') || (s.front() == '[' && s.back() == ']')))
    s = trim(std::string_view(s).substr(1, s.size() - 2));
  std::vector<double> out;
  const std::string hint = "write numbers separated by commas, e.g. " + std::string(flag) + " \"(0.9, 0.98)\"";
  if (s.empty()) fail_usage(std::string(flag) + " \"" + std::string(text) + "\": no number given", hint);
  size_t pos = 0;
  while (true) {
    size_t comma = s.find(',', pos);
    std::string item = trim(std::string_view(s).substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    char* end = nullptr;
    errno = 0;
    double v = item.empty() ? 0.0 : std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || errno == ERANGE || !std::isfinite(v))
      fail_usage(std::string(flag) + " \"" + std::string(text) + "\": '" + item + "' is not a finite number", hint);
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::pair<double, double> parse_adafactor_eps(std::string_view text) {
  auto v = parse_float_list("--adafactor-eps", text);
  if (v.size() != 2)
    fail_usage("--adafactor-eps \"" + std::string(text) + "\": needs two numbers, got " + std::to_string(v.size()),
               "e.g. --adafactor-eps \"(1e-30, 1e-3)\" (fairseq's default)");
  for (double e : v)
    if (!(e >= 0))
      fail_usage("--adafactor-eps \"" + std::string(text) + "\": each eps must be >= 0");
  return {v[0], v[1]};
}

std::pair<double, double> parse_adam_betas(std::string_view text) {
  auto v = parse_float_list("--adam-betas", text);
  if (v.size() != 2)
    fail_usage("--adam-betas \"" + std::string(text) + "\": needs two numbers, got " + std::to_string(v.size()),
               "e.g. --adam-betas \"(0.9, 0.98)\"");
  for (double b : v)
    if (!(b >= 0 && b < 1))
      fail_usage("--adam-betas \"" + std::string(text) + "\": each beta must be in [0, 1)");
  return {v[0], v[1]};
}

}  // namespace stretch::optim
