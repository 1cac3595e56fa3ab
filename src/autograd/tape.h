// autograd/tape.h — reverse-mode autodiff over coarse ops.
// Contract: while grad mode is on, every autograd function whose inputs require a gradient
// pushes one backward closure onto the thread's tape; Tape::backward(loss) seeds d(loss) and
// replays the closures in reverse, accumulating into .grad() of inputs, then clears the tape
// (releasing saved activations to the pool). NoGradGuard turns recording off (evaluation).
#pragma once
#include <functional>
#include <vector>

#include "autograd/var.h"

namespace stretch::autograd {

class Tape {
 public:
  void push(std::function<void()> backward_fn) { entries_.push_back(std::move(backward_fn)); }
  // Seeds loss.grad with `seed` (loss is a 1-element Var) and runs every closure in reverse.
  void backward(const Var& loss, float seed = 1.0f);
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::function<void()>> entries_;
};

Tape& tape();  // the current thread's tape
bool grad_enabled();
// True when an op with these inputs must record a backward closure.
inline bool needs_grad(std::initializer_list<const Var*> inputs) {
  if (!grad_enabled()) return false;
  for (const Var* v : inputs)
    if (v && v->defined() && v->requires_grad()) return true;
  return false;
}

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace stretch::autograd
