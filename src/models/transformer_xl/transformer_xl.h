// models/transformer_xl/transformer_xl.h — fairseq's transformer_xl (examples/truncated_bptt,
// a wrapper of HuggingFace's TransfoXLLMHeadModel; REFERENCE.md §6) behind models::LanguageModel.
// Contract:
//   * Parameters carry fairseq's state-dict names (decoder.model.transformer.*, decoder.model.crit.*)
//     in HF's named_parameters() order; the output weights are the tied word embedding tables,
//     listed once under their input-side names (word_emb.emb_layers.{i}.weight).
//   * Output layer (the cutoffs below V, config.h): none left, the full softmax over the tied
//     [V, C] table with bias crit.out_layers.0.bias [V]; else HF's ProjectedAdaptiveLogSoftmax
//     (nn/projected_adaptive_softmax.h) with crit.cluster_weight [k−1, C], crit.cluster_bias
//     [k−1] and, at div_val 1, the same tied table and bias [V]; at div_val > 1 the input is HF's
//     AdaptiveEmbedding (word_emb.emb_layers.{i}.weight [size_i, d_i], word_emb.emb_projs.{i}
//     [C, d_i]; nn/adaptive_input.h with hf_names), the output per band crit.out_layers.{i}.bias
//     and the tied table and projection (tie_projs: band i ≥ 1 reuses emb_projs.{i}), the head's
//     projection its own crit.out_projs.0 [C, C].
//   * init(seed): HF's distributions (Linear and Embedding weights N(0, 0.02), biases 0, LayerNorm
//     weight N(1, 0.02), r_w_bias / r_r_bias / cluster_weight N(0, 0.02), cluster_bias 0,
//     emb_projs / out_projs N(0, 0.01) = proj_init_std), drawn in parameter order from Philox.
//   * features(src [B, T]): emb = E[src]·sqrt(C) (div_val > 1: the band's table and projection), dropout; R [rows, C] the sinusoidal embedding of
//     distance d (position min(d, clamp_len) when clamp_len > 0), dropout once per forward, shared
//     by the layers; per layer (post-norm, no-bias q/k/v/r/o):
//       q = qkv_net_q(x) [B, T, HD], kv = qkv_net_kv([mem_l ‖ x]) [B, M+T, 2HD] (qkv_net's rows;
//       HF also projects the memory's queries and drops them), r = r_net(R) [rows, HD],
//       x = LN(x + drop(o_net(rel_attention(q, kv, r, u_l, v_l))))   (rel_attention.h: the fused op)
//       x = LN(x + drop(fc2(drop(relu(fc1(x))))))
//     then dropout; returns [B, T, C] (the last last_block_queries rows when asked).
//   * Memory (SegmentUse::Training, mem_len > 0): HiddenMemory of the n_layer layer INPUTS,
//     detached, the last mem_len rows of [mem ‖ inputs] after each segment; HF's semantics start it
//     as mem_len zero rows (also for a call without a state), xl_original starts it empty. It is
//     carried across training batches (and saved as segment.* in checkpoint_last), through
//     validation and eval-lm's truncated_bptt_lm task. same_length = attention window mem_len.
//     Generation (SegmentUse::Decode) uses the same memory as HF's TransfoXLLMHeadModel.generate
//     uses `mems`: the context in one call (after mem_len zero rows), then one token per call,
//     each seeing the last mem_len layer inputs; at mem_len 0 every earlier token is kept (HF
//     re-runs the whole sequence, the same numbers). SegmentUse::Memory (--kv-cache) is refused.
//     Padding is not masked (HF masks nothing; fairseq's loss ignores pad targets only).
//   * Dropout streams: (step << 24) ^ (micro << 16) ^ ((layer + 1) << 4) ^ site (layer −1: the
//     embedding, site 0, and R, site 1; layer L: the final dropout), micro < 256, L + 1 < 4096.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/language_model.h"
#include "models/transformer_xl/config.h"
#include "nn/adaptive_input.h"
#include "nn/linear.h"
#include "nn/output_head.h"

namespace stretch::models {

class TransformerXL final : public LanguageModel {
 public:
  explicit TransformerXL(TransformerXLConfig config);
  ModelInfo info() const override;
  nlohmann::json config_json() const override { return config_.to_json(); }
  nn::ParameterList& params() override { return params_; }
  const nn::ParameterList& params() const override { return params_; }
  void init(uint64_t seed) override;
  Var features(const Tensor& src, const ForwardOptions& opt) override;
  const nn::OutputHead& head() const override { return *head_; }
  std::unique_ptr<SegmentState> new_segment_state(SegmentUse use) const override;
  const TransformerXLConfig& config() const { return config_; }
  // fairseq's (HF's) parameter count of a config, without allocating it.
  static int64_t parameter_count(const TransformerXLConfig& config);

 private:
  struct Layer {
    Var r_r_bias, r_w_bias;  // [H, D] (the shared pair when shared_r())
    nn::Linear qkv_net, o_net, r_net;
    nn::LayerNorm attn_norm;
    nn::Linear fc1, fc2;
    nn::LayerNorm ff_norm;
  };
  uint64_t dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const;
  // xl_relative_embedding(rows, d_model, clamp_len), computed once per row count: config_ is fixed
  // at construction, so rows is all that varies (recomputed every forward, on one thread, it cost
  // 7-10% of a training step at T = M = 512: docs/BENCHMARKS.md).
  const Tensor& relative_embedding(int64_t rows);

  TransformerXLConfig config_;
  nn::ParameterList params_;
  Var shared_r_w_bias_, shared_r_r_bias_;  // [H, D] with shared_r()
  nn::Embedding word_emb_;                 // [V, C] (div_val 1)
  nn::AdaptiveInput adaptive_emb_;         // div_val > 1: per band [size_i, d_i] and [C, d_i]
  std::vector<Layer> layers_;
  std::unique_ptr<nn::OutputHead> head_;
  Tensor relative_embedding_;  // [rows, C], read only (dropout makes a new tensor)
};

// The sinusoidal relative embedding [rows, C]: row d = [sin(p·f_k) ‖ cos(p·f_k)], p = min(d, clamp)
// when clamp > 0, else d; f_k = 10000^(−2k/C), k < C/2 (HF's PositionalEmbedding in distance order).
Tensor xl_relative_embedding(int64_t rows, int64_t dim, int64_t clamp);

}  // namespace stretch::models
