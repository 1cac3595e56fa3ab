// models/language_model.h — THE interface every model family implements; train/, eval/, cli/
// and tools/ use nothing else (DESIGN.md §2b, docs/architecture.md "Model families").
// Contract:
//   * config_json(): the whole config with fairseq key names, "arch" included; build_model()
//     (models/registry.h) of that JSON gives the same model. info(): what the layers above need
//     without knowing the family (vocabulary, padding index, training length, a label).
//   * params(): named parameters in a fixed order (fairseq state-dict names; a tied parameter
//     once). The order is part of the numbers: the gradient norm sums in it.
//   * init(seed): the family's initialisation, a pure function of the seed.
//   * features(src [B, T] I32, options) -> hidden [B, T', C] (T' = T, or last_block_queries).
//     Train mode applies dropout with masks numbered by (seed, step, micro, layer, site);
//     Eval mode is deterministic. options.state, when given, is a SegmentState this family made
//     (new_segment_state): features() reads the earlier segments' state and appends this one.
//   * head(): the output head that owns the loss (nn/output_head.h).
//   * aux_loss(): an extra scalar added to the head's training loss after features() (undefined:
//     none); it is in the gradient, not in the logged loss. after_step(): called after every
//     applied optimizer step (e.g. clamping). train_metrics(): extra (key, value) pairs of the
//     last training forward that the train log averages over updates (Adaptive Span's avg_span).
//     take_unused_params(): the parameters no training forward since the last call used (LayerDrop's
//     skipped blocks), then forgets them; train_update() leaves them out of the optimizer step, as
//     fairseq's optimizers skip a parameter whose .grad is None.
//   * new_segment_state(use): state carried across calls. Generation (SegmentUse::Decode): the
//     KV cache; Memory: evaluation over consecutive segments keeping the last M tokens (a family
//     whose positions are absolute refuses with a usage error); Training: memory across
//     training batches (nullptr when the family has none; Transformer-XL / Adaptive Span).
//   * can_recompute_activations(): true when features() in Train mode honours
//     options.activations = Recompute (--checkpoint-activations) with bit-identical gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/var.h"
#include "nn/output_head.h"
#include "nn/parameters.h"
#include "tensor/safetensors.h"

namespace stretch::models {

using autograd::Var;

enum class Mode : uint8_t { Train, Eval };
enum class SegmentUse : uint8_t { Decode, Memory, Training };

// State a family carries from one call of features() to the next.
class SegmentState {
 public:
  virtual ~SegmentState() = default;
  virtual int64_t position() const = 0;  // tokens consumed so far (the next token's position)
  virtual int64_t kept() const = 0;      // tokens whose state is held now
  virtual void keep_last(int64_t memory) = 0;  // forget all but the last `memory` tokens
  // Tensors for a training checkpoint (exact resume), under names the family chooses.
  virtual NamedTensors save() const { return {}; }
  virtual void load(const NamedTensors& tensors) {}
};

struct ForwardOptions {
  Mode mode = Mode::Eval;
  uint64_t seed = 1;     // dropout seed (training)
  uint64_t step = 0;     // update number: dropout masks differ per step
  uint64_t micro = 0;    // micro-batch index within the update (--update-freq)
  SegmentState* state = nullptr;  // from new_segment_state(); src continues its segment
  // Evaluation without grad: the last block computes its query, attention output and FFN only
  // for the last n positions of each row (keys/values for all), so features() returns
  // [B, n, C] — what a scorer needs when only those positions are scored. 0: all positions.
  int64_t last_block_queries = 0;
  // Training with --checkpoint-activations: each block keeps only its input and recomputes its
  // forward in backward (autograd/checkpoint.h); the same numbers, less memory. Only for a family
  // whose can_recompute_activations() is true (the trainer refuses the flag for the others).
  autograd::Activations activations = autograd::Activations::Keep;
};

struct ModelInfo {
  std::string arch;            // --arch name
  std::string family;          // transformer_lm, ...
  int64_t vocab_size = 0;      // V
  int32_t padding_idx = 1;
  int64_t tokens_per_sample = 0;  // the training length
  bool add_bos_token = false;     // fairseq's --add-bos-token: <s> before every row (eval: before each block)
  std::string label;           // short description for tables: "alibi"
  std::string summary;         // one line for logs: "transformer_lm_tiny pos=alibi"
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual ModelInfo info() const = 0;
  virtual nlohmann::json config_json() const = 0;
  virtual nn::ParameterList& params() = 0;
  virtual const nn::ParameterList& params() const = 0;
  virtual void init(uint64_t seed) = 0;
  virtual Var features(const Tensor& src, const ForwardOptions& options) = 0;
  virtual const nn::OutputHead& head() const = 0;
  virtual Var aux_loss() { return Var(); }
  virtual void after_step() {}
  virtual std::vector<std::string> take_unused_params() { return {}; }
  virtual std::vector<std::pair<std::string, double>> train_metrics() const { return {}; }
  // True: validation continues the training segment state and leaves it to training (fairseq's
  // adaptive_span wrapper keeps one `_mems` for both); false: validation starts a memory of its own.
  virtual bool validation_shares_segment_state() const { return false; }
  virtual std::unique_ptr<SegmentState> new_segment_state(SegmentUse use) const = 0;
  // Whether features() honours ForwardOptions::activations = Recompute.
  virtual bool can_recompute_activations() const { return false; }
};

}  // namespace stretch::models
