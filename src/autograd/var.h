// autograd/var.h — Var: a tensor value with an optional gradient, shared by handle.
// Contract: grad() is allocated (zeros) on first use and ACCUMULATES across backward passes
// until zero_grad(); that accumulation is what --update-freq relies on. Parameters are Vars
// with requires_grad; activations are Vars produced by autograd functions (autograd/ops.h).
#pragma once
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace stretch::autograd {

struct VarImpl {
  Tensor value;
  Tensor grad;
  bool requires_grad = false;
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false)
      : impl_(std::make_shared<VarImpl>(VarImpl{std::move(value), Tensor(), requires_grad})) {}

  bool defined() const { return impl_ != nullptr; }
  Tensor& value() const { return impl_->value; }
  const Shape& shape() const { return impl_->value.shape(); }
  int64_t numel() const { return impl_->value.numel(); }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  void set_requires_grad(bool r) { impl_->requires_grad = r; }
  bool has_grad() const { return impl_->grad.defined(); }
  // The gradient buffer, allocated as zeros on first access (same shape as value).
  Tensor& grad() const {
    if (!impl_->grad.defined()) impl_->grad = Tensor::zeros(impl_->value.shape());
    return impl_->grad;
  }
  void zero_grad() const {
    if (impl_->grad.defined()) impl_->grad.zero_();
  }
  // Drop the gradient buffer (activations: returns memory to the pool).
  void release_grad() const { impl_->grad = Tensor(); }
  float* data() const { return impl_->value.f32(); }
  float* grad_data() const { return grad().f32(); }
  bool same(const Var& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<VarImpl> impl_;
};

}  // namespace stretch::autograd
