// autograd/checkpoint.cpp — see checkpoint.h.
#include "autograd/checkpoint.h"

#include <memory>

#include "autograd/grad_ready.h"
#include "autograd/tape.h"

namespace stretch::autograd {
namespace {

// Forwards every input the checkpointed ops report to the outer watch, at the index of the one
// entry that will run them all.
class RedirectWatch final : public GradWatch {
 public:
  RedirectWatch(GradWatch* outer, size_t index) : outer_(outer), index_(index) {}
  void on_input(const float* grad, int64_t numel, size_t /*tape_index*/) override {
    outer_->on_input(grad, numel, index_);
  }
  void on_entry_done(size_t /*tape_index*/) override {}

 private:
  GradWatch* outer_ = nullptr;
  size_t index_ = 0;
};

}  // namespace

Var checkpoint(const Var& x, std::function<Var(const Var&)> fn) {
  if (!grad_enabled()) return fn(x);
  const size_t index = tape().size();  // the index the one entry will have
  GradWatch* outer = grad_watch();
  if (outer && x.requires_grad() && x.has_grad()) outer->on_input(x.grad().f32(), x.numel(), index);
  Var y;
  bool recorded = false;
  {
    Tape scratch;
    TapeScope on_scratch(scratch);
    RedirectWatch redirect(outer, index);
    GradWatchScope watch(outer ? &redirect : nullptr);
    y = fn(Var(x.value(), x.requires_grad()));
    recorded = scratch.size() > 0;
    scratch.clear();  // fn's saved activations are released here
  }
  if (!recorded) return y;  // nothing in fn needs a gradient
  Var out(y.value(), true);
  auto f = std::make_shared<std::function<Var(const Var&)>>(std::move(fn));
  tape().push([x, out, f] {
    const Var leaf(x.value(), x.requires_grad());
    {
      Tape nested;
      TapeScope on_nested(nested);
      GradWatchScope no_watch(nullptr);  // the outer entry's index is what the watch knows
      const Var z = (*f)(leaf);
      STRETCH_CHECK(z.requires_grad() && z.shape() == out.shape(),
                    "checkpoint: the recomputed forward differs from the first one (" << z.shape().str() << " vs "
                                                                                        << out.shape().str() << ")");
      z.accumulate_grad(out.grad());  // adopts out's gradient buffer (zeros if nothing flowed back)
      out.release_grad();
      nested.replay();
    }
    if (x.requires_grad() && leaf.has_grad()) x.accumulate_grad(leaf.grad());
  });
  return out;
}

}  // namespace stretch::autograd
