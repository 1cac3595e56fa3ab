// models/transformer_lm/hidden_memory.h — XL-style memory of transformer_lm (--mem-len M;
// REFERENCE.md §6.3, the same rule for an ALiBi / T5 / no-position stack).
// Contract:
//   * Per layer l, the memory holds the INPUTS of layer l (layer 0: the embeddings after
//     dropout) of the last S ≤ M tokens before the current segment, [B, S, C], detached (no
//     gradient ever flows into an earlier segment), and which of those S tokens were padding,
//     [B, S] U8 (1 = pad; their keys stay masked). It starts empty (S = 0, as the original
//     Transformer-XL's init_mems, not HF's zeros) and grows to M.
//   * After a segment of T tokens: memory_l ← the last min(S + T, M) rows of [memory_l ‖ input_l]
//     (update()). The queries of the segment sit after the memory, so the attention kernel
//     places query i at key position S + i (ops/attention.h, p_i = S − T' + i with T' = S + T
//     keys): the ALiBi bias −m·(p_i − j) is measured in absolute stream positions across the
//     memory boundary (the error of lucidrains/x-transformers#242 does not arise).
//   * The batch size B is fixed while the memory is held; a batch of another size is a usage error.
//   * save()/load(): "mem.<l>" [B, S, C] F32 per layer, "mem.pad" [B, S] U8 and "mem.position"
//     [1] I64 (tokens consumed), so checkpoint_last continues bit-identically.
#pragma once
#include <cstdint>
#include <vector>

#include "models/language_model.h"

namespace stretch::models {

class HiddenMemory final : public SegmentState {
 public:
  HiddenMemory(int64_t layers, int64_t mem_len) : layers_(static_cast<size_t>(layers)), mem_len_(mem_len) {}
  int64_t position() const override { return position_; }
  int64_t kept() const override { return pad_.defined() ? pad_.dim(1) : 0; }
  void keep_last(int64_t memory) override;
  NamedTensors save() const override;
  void load(const NamedTensors& tensors) override;

  int64_t mem_len() const { return mem_len_; }
  // Layer l's memory [B, S, C] and the padding [B, S] U8; undefined while empty.
  const Tensor& layer(int64_t l) const { return layers_.at(static_cast<size_t>(l)); }
  const Tensor& padding() const { return pad_; }
  // The key padding of [memory ‖ segment]: [B, S + T] U8 from the segment's [B, T] (undefined:
  // none), or undefined when no key is padding.
  Tensor key_padding(const Tensor& segment_pad, int64_t rows, int64_t tokens) const;
  // Checks that a segment of B rows can use this memory (usage error otherwise).
  void check_rows(int64_t rows) const;
  // After a segment: inputs[l] [B, T, C] (layer l's inputs), pad [B, T] U8 (undefined: no padding).
  void update(const std::vector<Tensor>& inputs, const Tensor& pad, int64_t rows, int64_t tokens);
  // HuggingFace TransfoXL's init_mems (transformer_xl's default): every layer holds `memory` rows
  // of zeros [B, memory, width], none of them padding; the position is unchanged.
  void start_zeros(int64_t rows, int64_t memory, int64_t width);

 private:
  std::vector<Tensor> layers_;  // [L] of [B, S, C]
  Tensor pad_;                  // [B, S] U8
  int64_t mem_len_ = 0;
  int64_t position_ = 0;
};

}  // namespace stretch::models
