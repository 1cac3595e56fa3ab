// nn/parameters.h — a model's parameters: named Vars in fairseq state-dict order, and the
// initialisers fairseq uses (REFERENCE.md §2.3). A tied parameter appears once.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "core/rng.h"

namespace stretch::nn {

using autograd::Var;

class ParameterList {
 public:
  // Registers a new trainable parameter of `shape`, zero-filled; returns its handle.
  Var add(const std::string& name, Shape shape);
  // Registers an existing Var (e.g. a view into a fused weight) under `name`.
  Var add(const std::string& name, Var v);
  const std::vector<std::pair<std::string, Var>>& items() const { return items_; }
  const Var& get(const std::string& name) const;
  bool contains(const std::string& name) const;
  int64_t numel() const;
  void zero_grad() const;

 private:
  std::vector<std::pair<std::string, Var>> items_;
};

// torch.nn.init.xavier_uniform_(w [O, I], gain): U(±gain·sqrt(6 / (I + O)))
void init_xavier_uniform(Var& w, float gain, Rng& rng);
// torch nn.Linear default for a weight [O, I] or bias [O] with fan_in I: U(±1/sqrt(I))
void init_uniform_fan_in(Var& p, int64_t fan_in, Rng& rng);
// N(mean, std)
void init_normal(Var& p, float mean, float std, Rng& rng);
void init_constant(Var& p, float value);

}  // namespace stretch::nn
