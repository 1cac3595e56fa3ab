// autograd/grad_ready.h — GradReady: tells, during backward, the moment each leaf's gradient is
// final (no closure left on the tape can write it), so data parallelism can start reducing it.
// Contract: install it (GradWatchScope) before the forward whose backward it watches. In forward
// it records, per leaf, the smallest tape index r at which an op took an input whose gradient
// buffer overlaps the leaf's (a fused weight covers its q/k/v views; a view lies inside its
// parameter). Every closure that can write the leaf's gradient belongs to such an op and so sits
// at an index >= r; backward runs indices downwards, so once closure r has run the leaf is final
// and on_ready(leaf) is called — exactly once, in decreasing r (ties in leaf order). A leaf no op
// took is never reported (the caller treats it as final after backward). on_step() runs after
// every closure (a place to progress communication).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/tape.h"

namespace stretch::autograd {

struct LeafGrad {
  const float* grad = nullptr;  // the gradient buffer [numel]
  int64_t numel = 0;
};

class GradReady final : public GradWatch {
 public:
  GradReady(std::vector<LeafGrad> leaves, std::function<void(size_t leaf)> on_ready, std::function<void()> on_step);
  void on_input(const float* grad, int64_t numel, size_t tape_index) override;
  void on_entry_done(size_t tape_index) override;
  size_t reported() const { return cursor_; }  // leaves reported so far

 private:
  struct Span {
    uintptr_t begin = 0, end = 0;
    size_t leaf = 0;
  };
  std::vector<Span> spans_;          // sorted by begin
  std::vector<size_t> first_use_;    // per leaf; kUnused when no op took it
  std::vector<size_t> order_;        // used leaves by decreasing first use (built at the first closure)
  bool ordered_ = false;
  size_t cursor_ = 0;
  std::function<void(size_t)> on_ready_;
  std::function<void()> on_step_;
};

// Installs a watch for the current thread for the scope's lifetime (restores the previous one).
class GradWatchScope {
 public:
  explicit GradWatchScope(GradWatch* w) : previous_(grad_watch()) { set_grad_watch(w); }
  ~GradWatchScope() { set_grad_watch(previous_); }
  GradWatchScope(const GradWatchScope&) = delete;
  GradWatchScope& operator=(const GradWatchScope&) = delete;

 private:
  GradWatch* previous_ = nullptr;
};

}  // namespace stretch::autograd
