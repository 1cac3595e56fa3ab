// autograd/tape.h — reverse-mode autodiff over coarse ops.
// Contract: while grad mode is on, every autograd function whose inputs require a gradient
// pushes one backward closure onto the thread's tape; Tape::backward(loss) seeds d(loss) and
// replays the closures in reverse, accumulating into .grad() of inputs, then clears the tape
// (releasing saved activations to the pool). NoGradGuard turns recording off (evaluation).
// A GradWatch (autograd/grad_ready.h), when set, sees every input of a recording op with the
// index its closure will have at least, and every closure index once it has run in backward: what
// tells data parallelism that a parameter's gradient is final (dist/bucket_allreduce.h).
#pragma once
#include <functional>
#include <vector>

#include "autograd/var.h"

namespace stretch::autograd {

// Observer of gradient flow; see grad_ready.h. Null (the default) costs one load per op.
class GradWatch {
 public:
  virtual ~GradWatch() = default;
  // Forward: an op about to record has an input whose gradient buffer is [grad, grad + numel);
  // its closure will be at index >= tape_index (nested ops may push first).
  virtual void on_input(const float* grad, int64_t numel, size_t tape_index) = 0;
  // Backward: the closure at tape_index has run (indices arrive in decreasing order).
  virtual void on_entry_done(size_t tape_index) = 0;
};
GradWatch* grad_watch();            // the current thread's watch (nullptr: none)
void set_grad_watch(GradWatch* w);  // nullptr removes it

class Tape {
 public:
  void push(std::function<void()> backward_fn) { entries_.push_back(std::move(backward_fn)); }
  // Seeds loss.grad with `seed` (loss is a 1-element Var) and runs every closure in reverse.
  void backward(const Var& loss, float seed = 1.0f);
  // Runs every closure in reverse (the outputs' gradients already seeded), then clears. The
  // thread's GradWatch, if any, sees each closure (autograd/checkpoint.cpp replays a nested tape
  // with the watch removed).
  void replay();
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::function<void()>> entries_;
};

Tape& tape();  // the current thread's tape (its own, or the one a TapeScope installed)
bool grad_enabled();

// Makes `t` the current thread's tape for the scope's lifetime (restores the previous one): the
// ops run inside record there. autograd::checkpoint records a block's forward on a scratch tape
// and its recomputation in backward on a nested one, while the outer tape is being replayed.
class TapeScope {
 public:
  explicit TapeScope(Tape& t);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_ = nullptr;
};

// True when an op with these inputs must record a backward closure.
inline bool needs_grad(std::initializer_list<const Var*> inputs) {
  if (!grad_enabled()) return false;
  bool any = false;
  for (const Var* v : inputs)
    if (v && v->defined() && v->requires_grad()) any = true;
  if (GradWatch* w = any ? grad_watch() : nullptr)
    for (const Var* v : inputs)
      if (v && v->defined() && v->requires_grad() && v->has_grad()) w->on_input(v->grad().f32(), v->numel(), tape().size());
  return any;
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
