#include "autograd/grad_ready.h"

#include <algorithm>
#include <limits>

namespace stretch::autograd {
namespace {
constexpr size_t kUnused = std::numeric_limits<size_t>::max();
}

GradReady::GradReady(std::vector<LeafGrad> leaves, std::function<void(size_t)> on_ready, std::function<void()> on_step)
    : first_use_(leaves.size(), kUnused), on_ready_(std::move(on_ready)), on_step_(std::move(on_step)) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto b = reinterpret_cast<uintptr_t>(leaves[i].grad);
    spans_.push_back({.begin = b, .end = b + static_cast<uintptr_t>(leaves[i].numel) * sizeof(float), .leaf = i});
  }
  std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  // on_input's walk stops at the first leaf below the range: exact only when leaves are disjoint.
  for (size_t i = 1; i < spans_.size(); ++i)
    STRETCH_CHECK(spans_[i - 1].end <= spans_[i].begin,
                  "GradReady: leaves " << spans_[i - 1].leaf << " and " << spans_[i].leaf
                                       << " share gradient memory (list a tied or fused parameter once)");
}

void GradReady::on_input(const float* grad, int64_t numel, size_t tape_index) {
  const auto b = reinterpret_cast<uintptr_t>(grad);
  const uintptr_t e = b + static_cast<uintptr_t>(numel) * sizeof(float);
  // Leaves overlapping [b, e): those starting before e, walking down while they end after b.
  auto it = std::lower_bound(spans_.begin(), spans_.end(), e, [](const Span& s, uintptr_t v) { return s.begin < v; });
  while (it != spans_.begin()) {
    --it;
    if (it->end <= b) break;  // leaves do not overlap one another, so nothing further down reaches b
    first_use_[it->leaf] = std::min(first_use_[it->leaf], tape_index);
  }
}

void GradReady::on_entry_done(size_t tape_index) {
  if (!ordered_) {
    for (size_t i = 0; i < first_use_.size(); ++i)
      if (first_use_[i] != kUnused) order_.push_back(i);
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return first_use_[a] > first_use_[b]; });
    ordered_ = true;
  }
  while (cursor_ < order_.size() && first_use_[order_[cursor_]] >= tape_index) on_ready_(order_[cursor_++]);
  if (on_step_) on_step_();
}

}  // namespace stretch::autograd
