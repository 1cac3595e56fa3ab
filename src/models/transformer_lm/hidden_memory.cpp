// models/transformer_lm/hidden_memory.cpp — see hidden_memory.h.
#include "models/transformer_lm/hidden_memory.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace stretch::models {
namespace {

template <class T>
const T* cdata_of(const Tensor& t) { return static_cast<const T*>(t.bytes()); }

// The last min(S + T, keep) rows of [mem [B, S, E] ‖ x [B, T, E]] per batch row: [B, kept, E].
// mem undefined: S = 0. x undefined: T rows of zeros (no padding).
template <class T>
Tensor tail_rows(const Tensor& mem, const Tensor& x, int64_t rows, int64_t tokens, int64_t width, int64_t keep,
                 DType dtype) {
  const int64_t S = mem.defined() ? mem.dim(1) : 0;
  const int64_t n = std::min(S + tokens, keep);
  Tensor out = Tensor::empty({rows, n, width}, dtype);
  T* o = static_cast<T*>(out.bytes());
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t r = 0; r < n; ++r) {
      const int64_t k = S + tokens - n + r;  // row of the concatenation
      T* dst = o + (b * n + r) * width;
      if (k < S) std::copy_n(cdata_of<T>(mem) + (b * S + k) * width, width, dst);
      else if (x.defined()) std::copy_n(cdata_of<T>(x) + (b * tokens + k - S) * width, width, dst);
      else std::fill_n(dst, width, T{});
    }
  return out;
}

}  // namespace

void HiddenMemory::check_rows(int64_t rows) const {
  if (pad_.defined() && pad_.dim(0) != rows)
    fail_usage("--mem-len: the memory holds " + std::to_string(pad_.dim(0)) + " streams, but this batch has " +
                   std::to_string(rows) + " rows",
               "memory needs the same number of streams in every batch: use --task truncated_bptt_lm with a fixed "
               "--batch-size (and the same --batch-size-valid)");
}

Tensor HiddenMemory::key_padding(const Tensor& segment_pad, int64_t rows, int64_t tokens) const {
  const int64_t S = kept();
  bool any = segment_pad.defined();
  if (S > 0)
    for (int64_t i = 0; i < pad_.numel() && !any; ++i) any = pad_.u8()[i] != 0;
  if (!any) return Tensor();
  if (S == 0) return segment_pad;
  Tensor out = Tensor::zeros({rows, S + tokens}, DType::U8);  // [B, S + T]
  for (int64_t b = 0; b < rows; ++b) {
    std::copy_n(pad_.u8() + b * S, S, out.u8() + b * (S + tokens));
    if (segment_pad.defined()) std::copy_n(segment_pad.u8() + b * tokens, tokens, out.u8() + b * (S + tokens) + S);
  }
  return out;
}

void HiddenMemory::update(const std::vector<Tensor>& inputs, const Tensor& pad, int64_t rows, int64_t tokens) {
  STRETCH_CHECK(inputs.size() == layers_.size(), "HiddenMemory: " << inputs.size() << " layers of inputs");
  check_rows(rows);
  position_ += tokens;
  if (mem_len_ <= 0) return;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int64_t C = inputs[l].dim(2);
    layers_[l] = tail_rows<float>(layers_[l], inputs[l], rows, tokens, C, mem_len_, DType::F32);
  }
  Tensor p3 = pad.defined() ? pad.view({rows, tokens, 1}) : Tensor();
  Tensor m3 = pad_.defined() ? pad_.view({rows, pad_.dim(1), 1}) : Tensor();
  Tensor kept = tail_rows<uint8_t>(m3, p3, rows, tokens, 1, mem_len_, DType::U8);
  pad_ = kept.view({rows, kept.dim(1)});
}

void HiddenMemory::start_zeros(int64_t rows, int64_t memory, int64_t width) {
  for (auto& t : layers_) t = Tensor::zeros({rows, memory, width});
  pad_ = Tensor::zeros({rows, memory}, DType::U8);
}

void HiddenMemory::keep_last(int64_t memory) {
  if (!pad_.defined() || pad_.dim(1) <= memory) return;
  const int64_t rows = pad_.dim(0);
  for (auto& t : layers_) t = tail_rows<float>(t, Tensor(), rows, 0, t.dim(2), memory, DType::F32);
  Tensor m3 = tail_rows<uint8_t>(pad_.view({rows, pad_.dim(1), 1}), Tensor(), rows, 0, 1, memory, DType::U8);
  pad_ = m3.view({rows, m3.dim(1)});
}

NamedTensors HiddenMemory::save() const {
  NamedTensors out;
  Tensor pos = Tensor::empty({1}, DType::I64);
  pos.i64()[0] = position_;
  out.emplace_back("mem.position", pos);
  if (!pad_.defined()) return out;
  for (size_t l = 0; l < layers_.size(); ++l) out.emplace_back("mem." + std::to_string(l), layers_[l]);
  out.emplace_back("mem.pad", pad_);
  return out;
}

void HiddenMemory::load(const NamedTensors& tensors) {
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  };
  *this = HiddenMemory(static_cast<int64_t>(layers_.size()), mem_len_);
  const Tensor* pos = find("mem.position");
  if (!pos) return;  // a checkpoint without memory (written before --mem-len): start empty
  auto bad = [](const std::string& what) {
    fail_input("checkpoint", "segment state: " + what, "resume with the --mem-len and --decoder-layers the run had");
  };
  if (pos->dtype() != DType::I64 || pos->numel() != 1) bad("mem.position must be one I64");
  position_ = pos->i64()[0];
  const Tensor* pad = find("mem.pad");
  if (!pad) return;  // saved while empty
  if (pad->dtype() != DType::U8 || pad->rank() != 2) bad("mem.pad must be [B, S] U8");
  pad_ = pad->clone();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Tensor* t = find("mem." + std::to_string(l));
    if (!t) bad("mem." + std::to_string(l) + " is missing");
    if (t->dtype() != DType::F32 || t->rank() != 3 || t->dim(0) != pad_.dim(0) || t->dim(1) != pad_.dim(1))
      bad("mem." + std::to_string(l) + " has shape " + t->shape().str() + ", not [B, S, C] with [B, S] = " +
          pad_.shape().str());
    layers_[l] = t->clone();
  }
  if (mem_len_ > 0) keep_last(mem_len_);
}

}  // namespace stretch::models
