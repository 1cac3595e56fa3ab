#include "autograd/tape.h"

namespace stretch::autograd {
namespace {
thread_local Tape t_tape;
thread_local Tape* t_current = &t_tape;
thread_local bool t_grad_enabled = true;
thread_local GradWatch* t_grad_watch = nullptr;
}  // namespace

GradWatch* grad_watch() { return t_grad_watch; }
void set_grad_watch(GradWatch* w) { t_grad_watch = w; }

Tape& tape() { return *t_current; }
bool grad_enabled() { return t_grad_enabled; }

TapeScope::TapeScope(Tape& t) : previous_(t_current) { t_current = &t; }
TapeScope::~TapeScope() { t_current = previous_; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

void Tape::backward(const Var& loss, float seed) {
  STRETCH_CHECK(loss.numel() == 1, "backward needs a scalar loss, got " << loss.shape().str());
  loss.grad().f32()[0] += seed;
  replay();
}

void Tape::replay() {
  if (GradWatch* w = t_grad_watch) {
    for (size_t i = entries_.size(); i-- > 0;) {
      entries_[i]();
      w->on_entry_done(i);
    }
  } else {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) (*it)();
  }
  entries_.clear();
}

}  // namespace stretch::autograd
