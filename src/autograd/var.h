// autograd/var.h — Var: a tensor value with an optional gradient, shared by handle.
// Contract: grad() is allocated (zeros) on first use and ACCUMULATES across backward passes
// until zero_grad(); that accumulation is what --update-freq relies on. Parameters are Vars
// with requires_grad; activations are Vars produced by autograd functions (autograd/ops.h).
// Backward closures that produce a whole gradient use grad_for() (no zero-fill when the buffer
// is fresh: the kernel overwrites it) or accumulate_grad() (a fresh gradient adopts the given
// buffer without a copy, e.g. the pass-through of a residual connection).
#pragma once
#include <memory>
#include <string>

#include "ops/elementwise.h"
#include "ops/grad_init.h"
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
  // A parameter whose value and gradient are given buffers (e.g. views into a fused weight, so
  // that q/k/v keep their own names while one GEMM computes all three).
  Var(Tensor value, Tensor grad, bool requires_grad)
      : impl_(std::make_shared<VarImpl>(VarImpl{std::move(value), std::move(grad), requires_grad})) {}

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
  // The gradient buffer for a kernel that stores into every element of it: when there is no
  // gradient yet, a fresh uninitialised buffer and init = Overwrite; else the buffer and Accumulate.
  float* grad_for(ops::GradInit& init) const {
    init = impl_->grad.defined() ? ops::GradInit::Accumulate : ops::GradInit::Overwrite;
    if (!impl_->grad.defined()) impl_->grad = Tensor::empty(impl_->value.shape());
    return impl_->grad.f32();
  }
  // grad += g; with no gradient yet, grad becomes g itself (shared buffer, no copy): the caller
  // must not write g afterwards.
  void accumulate_grad(const Tensor& g) const {
    if (!impl_->grad.defined()) {
      impl_->grad = g.view(impl_->value.shape());
      return;
    }
    ops::axpy(impl_->grad.f32(), g.f32(), 1.0f, impl_->grad.numel());
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
