// models/transformer_lm.h — fairseq's decoder-only transformer_lm with every position method.
// Contract: parameters carry fairseq state-dict names (decoder.embed_tokens.weight, ...);
// init follows fairseq (REFERENCE.md §2.3); forward matches fairseq's TransformerDecoder
// (embedding · sqrt(C), positions, dropout, pre/post-norm blocks, optional final norm, tied or
// untied output). features() and output() are split so evaluation can project only the rows
// it scores.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/var.h"
#include "models/transformer_lm_config.h"
#include "nn/parameters.h"

namespace stretch::models {

using autograd::Var;

enum class Mode : uint8_t { Train, Eval };

// Keys and values of earlier tokens for incremental decoding: per layer k, v [B, H, S, D].
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;  // S: tokens already cached
};

struct ForwardOptions {
  Mode mode = Mode::Eval;
  uint64_t seed = 1;     // dropout seed (training)
  uint64_t step = 0;     // update number: dropout masks differ per step
  uint64_t micro = 0;    // micro-batch index within the update (--update-freq)
  KvCache* cache = nullptr;  // incremental decoding: src continues the cached prefix (eval only)
  // Evaluation without grad: the last block computes its query, attention output and FFN only
  // for the last n positions of each row (keys/values for all), so features() returns
  // [B, n, C] — what a scorer needs when only those positions are scored. 0: all positions.
  int64_t last_block_queries = 0;
};

class TransformerLM {
 public:
  explicit TransformerLM(TransformerLMConfig config);
  void init(uint64_t seed);  // fairseq initialisation from a seed

  const TransformerLMConfig& config() const { return config_; }
  TransformerLMConfig& mutable_config() { return config_; }
  nn::ParameterList& params() { return params_; }
  const nn::ParameterList& params() const { return params_; }

  // src [B, T] I32 -> hidden states [B, T, C] after the last block (and final norm).
  Var features(const Tensor& src, const ForwardOptions& opt);
  // hidden [.., C] -> logits [.., V]
  Var output(const Var& hidden);
  // Convenience: logits [B, T, V]
  Var forward(const Tensor& src, const ForwardOptions& opt) { return output(features(src, opt)); }

 private:
  struct Layer {
    Var q_w, q_b, k_w, k_b, v_w, v_b, out_w, out_b;
    Var qkv_w, qkv_b;  // [3C, C], [3C]: rows q; k; v — the three above are views into these
    Var attn_ln_w, attn_ln_b, fc1_w, fc1_b, fc2_w, fc2_b, ffn_ln_w, ffn_ln_b;
  };
  // queries: positions (the last ones of each row) the block outputs; x's T for all.
  Var block(const Layer& layer, int64_t index, const Var& x, const Tensor& key_padding, const ForwardOptions& opt,
            int64_t queries);
  // xq [B, Tq, C] are the last Tq positions of xkv [B, T, C].
  Var self_attention(const Layer& layer, int64_t index, const Var& xq, const Var& xkv, const Tensor& key_padding,
                     const ForwardOptions& opt);
  Var add_positions(const Var& x, const Tensor& src, int64_t pos_offset);
  uint64_t dropout_stream(const ForwardOptions& opt, int64_t layer, int site) const;

  TransformerLMConfig config_;
  nn::ParameterList params_;
  Var embed_tokens_, embed_positions_, output_projection_, final_ln_w_, final_ln_b_, t5_table_;
  Var alibi_slopes_;  // [H] fixed ALiBi slopes (PosMethod::Alibi), not a parameter
  std::vector<Layer> layers_;
};

}  // namespace stretch::models
