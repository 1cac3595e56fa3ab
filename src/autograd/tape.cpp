#include "autograd/tape.h"

namespace stretch::autograd {
namespace {
thread_local Tape t_tape;
thread_local bool t_grad_enabled = true;
}  // namespace

Tape& tape() { return t_tape; }
bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

void Tape::backward(const Var& loss, float seed) {
  STRETCH_CHECK(loss.numel() == 1, "backward needs a scalar loss, got " << loss.shape().str());
  loss.grad().f32()[0] += seed;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) (*it)();
  entries_.clear();
}

}  // namespace stretch::autograd
