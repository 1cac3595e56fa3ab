// nn/vocab_bands.h — the vocabulary cut into frequency bands, as fairseq's AdaptiveInput and
// AdaptiveSoftmax cut it: cutoffs c_0 < c_1 < ... < c_{k-1} < V, with V appended, give bands
// [0, c_0), [c_0, c_1), ..., [c_{k-1}, V). Band i's dimension is floor(dim / factor^i).
// route() sorts a batch's ids (inputs or targets) into per-band rows and band-local ids, the
// bookkeeping both modules share (fairseq's masks and index_select).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace stretch::nn {

struct VocabBands {
  std::vector<int64_t> ends;  // c_0, ..., c_{k-1}, V: band i is [start(i), ends[i])

  static VocabBands make(const std::vector<int64_t>& cutoffs, int64_t vocab_size) {
    VocabBands b{cutoffs};
    if (b.ends.empty() || vocab_size > b.ends.back()) b.ends.push_back(vocab_size);
    return b;
  }
  int64_t count() const { return static_cast<int64_t>(ends.size()); }
  int64_t start(int64_t i) const { return i == 0 ? 0 : ends[static_cast<size_t>(i - 1)]; }
  int64_t size(int64_t i) const { return ends[static_cast<size_t>(i)] - start(i); }
  int64_t band_of(int64_t id) const {
    int64_t i = 0;
    while (i + 1 < count() && id >= ends[static_cast<size_t>(i)]) ++i;
    return i;
  }
  // fairseq's int(dim // factor ** i)
  static int64_t dim(int64_t initial_dim, double factor, int64_t i) {
    return static_cast<int64_t>(std::floor(static_cast<double>(initial_dim) / std::pow(factor, static_cast<double>(i))));
  }
};

// Per band: the rows (I64 [n_i], in row order) whose id lies in the band, and the band-local ids
// (I32 [n_i], id − start). Rows whose id equals `skip` are left out (-1: none).
struct BandRoute {
  std::vector<Tensor> rows, local;
};
// The adaptive heads' target check: every id is `pad` or in [0, vocab_size); else an input error
// naming the offset (the data was binarized with another dictionary).
inline void check_target_ids(const int32_t* t, int64_t n, int64_t vocab_size, int64_t pad) {
  for (int64_t i = 0; i < n; ++i)
    if (t[i] != pad && (t[i] < 0 || t[i] >= vocab_size))
      throw Error(ErrorKind::Input, "adaptive softmax: target id " + std::to_string(t[i]) + " at offset " +
                                        std::to_string(i) + " is outside the vocabulary of " +
                                        std::to_string(vocab_size),
                  "the data was binarized with a larger dictionary than the model's");
}

inline BandRoute route(const VocabBands& bands, const int32_t* ids, int64_t n, int64_t skip = -1) {
  const int64_t k = bands.count();
  std::vector<std::vector<int64_t>> r(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] != skip) r[static_cast<size_t>(bands.band_of(ids[i]))].push_back(i);
  BandRoute out;
  for (int64_t b = 0; b < k; ++b) {
    const auto& rb = r[static_cast<size_t>(b)];
    const auto m = static_cast<int64_t>(rb.size());
    Tensor rows = Tensor::empty({m}, DType::I64), local = Tensor::empty({m}, DType::I32);
    for (int64_t j = 0; j < m; ++j) {
      rows.i64()[j] = rb[static_cast<size_t>(j)];
      local.i32()[j] = static_cast<int32_t>(ids[rb[static_cast<size_t>(j)]] - bands.start(b));
    }
    out.rows.push_back(rows);
    out.local.push_back(local);
  }
  return out;
}

}  // namespace stretch::nn
