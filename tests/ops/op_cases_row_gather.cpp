// tests/ops/op_cases_row_gather.cpp — registry cases for row_gather (the adaptive softmax's and
// adaptive input's routing of rows to vocabulary bands) and embedding with a padding row.
#include <string>
#include <tuple>

#include "ops/embedding.h"
#include "ops/op_test_registry.h"
#include "ops/row_gather.h"

namespace stretch::ops::testing {
namespace {

Output out_of(const char* name, std::vector<float>& v) { return {name, v.data(), static_cast<int64_t>(v.size())}; }

class RowGatherRun : public OpRun {
 public:
  RowGatherRun(RowGatherDims d, uint64_t seed, GradInit init) : d_(d), init_(init) {
    const std::vector<int32_t> ids = random_ids(d.n, static_cast<int32_t>(d.rows), seed);
    rows_.assign(ids.begin(), ids.end());
    if (d.n > 2) rows_[d.n - 1] = rows_[0];  // a repeated row: the scatter-add must sum both
    x_ = random_floats(d.rows * d.c, seed + 1);
    dout_ = random_floats(d.n * d.c, seed + 2);
    for (auto& o : o_) {
      o.out = random_floats(d.n * d.c, seed + 3);  // Accumulate adds into these
      o.dx = random_floats(d.rows * d.c, seed + 4);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) {
        row_gather_forward(o.out.data(), x_.data(), rows_.data(), d_, init_);
      } else if (init_ == GradInit::Accumulate) {
        std::vector<float> tmp(o.out.size());
        ref::row_gather_forward(tmp.data(), x_.data(), rows_.data(), d_);
        for (size_t i = 0; i < tmp.size(); ++i) o.out[i] += tmp[i];
      } else {
        ref::row_gather_forward(o.out.data(), x_.data(), rows_.data(), d_);
      }
    } else {
      if (impl == Impl::Fast) row_gather_backward(o.dx.data(), dout_.data(), rows_.data(), d_);
      else ref::row_gather_backward(o.dx.data(), dout_.data(), rows_.data(), d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dx", o.dx)};
  }
  int64_t bytes(Pass) const override { return 4 * 3 * d_.n * d_.c; }

 private:
  struct Out {
    std::vector<float> out, dx;
  };
  RowGatherDims d_;
  GradInit init_;
  std::vector<int64_t> rows_;
  std::vector<float> x_, dout_;
  Out o_[2];
};

// Embedding backward with a padding row: nothing may be added into it.
class PaddedEmbeddingRun : public OpRun {
 public:
  PaddedEmbeddingRun(EmbeddingDims d, uint64_t seed) : d_(d) {
    ids_ = random_ids(d.n, static_cast<int32_t>(d.v), seed);
    for (int64_t i = 0; i < d.n; i += 3) ids_[i] = d.padding_idx;  // pad ids throughout
    table_ = random_floats(d.v * d.c, seed + 1);
    dout_ = random_floats(d.n * d.c, seed + 2);
    for (auto& o : o_) {
      o.out.assign(d.n * d.c, 0.f);
      o.dtable = random_floats(d.v * d.c, seed + 3);
    }
  }
  void run(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    if (pass == Pass::Forward) {
      if (impl == Impl::Fast) embedding_forward(o.out.data(), ids_.data(), table_.data(), 2.f, d_);
      else ref::embedding_forward(o.out.data(), ids_.data(), table_.data(), 2.f, d_);
    } else {
      if (impl == Impl::Fast) embedding_backward(o.dtable.data(), dout_.data(), ids_.data(), 2.f, d_);
      else ref::embedding_backward(o.dtable.data(), dout_.data(), ids_.data(), 2.f, d_);
    }
  }
  std::vector<Output> outputs(Impl impl, Pass pass) override {
    Out& o = o_[static_cast<int>(impl)];
    return {pass == Pass::Forward ? out_of("out", o.out) : out_of("dtable", o.dtable)};
  }
  int64_t bytes(Pass) const override { return 4 * 3 * d_.n * d_.c; }

 private:
  struct Out {
    std::vector<float> out, dtable;
  };
  EmbeddingDims d_;
  std::vector<int32_t> ids_;
  std::vector<float> table_, dout_;
  Out o_[2];
};

}  // namespace

void add_row_gather_cases(std::vector<OpCase>& cases) {
  const Tolerance tol{1e-6, 1e-6,
                      "forward is a copy (bitwise) or one add; backward adds in the same index order as the "
                      "reference, only FMA contraction may differ: ~1 ulp per addition"};
  struct S {
    int64_t n, rows, c;
    Size size;
  };
  const S shapes[] = {{1, 1, 1, Size::Edge}, {2, 9, 3, Size::Edge},    {7, 3, 5, Size::Edge},
                      {64, 100, 17, Size::Edge}, {300, 500, 256, Size::Edge}, {8192, 8192, 1024, Size::Bench}};
  uint64_t seed = 4100;
  for (const S& s : shapes)
    for (GradInit init : {GradInit::Overwrite, GradInit::Accumulate}) {
      const uint64_t sd = seed += 10;
      const RowGatherDims d{.n = s.n, .rows = s.rows, .c = s.c};
      cases.push_back(OpCase{.op = "row_gather",
                             .shape = "n=" + std::to_string(s.n) + " rows=" + std::to_string(s.rows) +
                                      " c=" + std::to_string(s.c) +
                                      (init == GradInit::Accumulate ? " accumulate" : ""),
                             .tol = tol,
                             .make = [d, sd, init] { return std::make_unique<RowGatherRun>(d, sd, init); },
                             .size = s.size});
    }
  for (const auto& [n, v, c] : {std::tuple<int64_t, int64_t, int64_t>{6, 4, 3}, {200, 50, 64}}) {
    const EmbeddingDims d{.n = n, .v = v, .c = c, .padding_idx = 1};
    cases.push_back(OpCase{.op = "embedding",
                           .shape = "n=" + std::to_string(n) + " v=" + std::to_string(v) + " c=" + std::to_string(c) +
                                    " padding_idx=1",
                           .tol = tol,
                           .make = [d] { return std::make_unique<PaddedEmbeddingRun>(d, 4300); }});
  }
}

}  // namespace stretch::ops::testing
