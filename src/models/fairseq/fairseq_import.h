// models/fairseq/fairseq_import.h — fairseq checkpoints (torch.save .pt) → stretch models.
// Contract: import_fairseq() reads the file with tensor/torch_file.h (restricted pickle: never
// executes code), takes the model config from `cfg.model` (fairseq >= 0.10, a dict) or `args`
// (argparse-era, a Namespace), and converts through ONE mapping table per family
// (fairseq_mapping.cpp): which fairseq config keys map to which stretch keys, which keys must
// hold a neutral value (a feature stretch does not have: an error naming key and value), which
// are training-only (ignored), and how state-dict names map to stretch parameter names.
// Keys the table does not know are reported on one line, never guessed. Every tensor of the
// state dict must be used (or be a known buffer: version, _float_tensor) and every parameter
// the stretch model needs must be present, with its shape; fp16 weights become fp32.
// The model is what fairseq built from that config (plain --arch transformer_lm in 0.12.2
// skips base_lm's defaults: the stored values are used, never stretch's presets).
// ALiBi fork checkpoints (ofirpress/attention_with_linear_biases) carry no ALiBi flag: they keep
// the sinusoidal embed_positions entry and say positions are on. The one trace is `max_tokens`
// in the model config (the fork's decoder reads it, REFERENCE §1.2): with sinusoidal positions
// it adds a note; options.pos = "alibi" imports the file as ALiBi ("" = as stored). Argparse-era
// args always hold max_tokens, so the note is a hint, not a verdict.
// extra_state["ema"] (fairseq-train --store-ema's moving average, a state dict of the same model) is
// imported through the same mapping and appended as "ema.<parameter>" tensors (train/ema.h's names;
// ema_kept_note() says so); when it does not import (fairseq 0.12.2 saves a pre-norm model's without the final LayerNorm) a
// note says why and the weights import alone.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/safetensors.h"

namespace stretch::models {

struct FairseqImportOptions {
  std::string pos{};  // "" (as stored) or "alibi"
};

struct FairseqImport {
  nlohmann::json config = nlohmann::json::object();  // a stretch model config (fairseq keys, "arch")
  NamedTensors tensors{};                            // stretch parameter names, F32
  std::vector<std::string> notes{};                  // what the import decided (printed by callers)
  std::string container{};                           // "zip" or "legacy"
  std::string fairseq_arch{};                        // as stored
  std::string task_data{};                           // cfg.task.data / args.data, as stored (informational)
};

FairseqImport import_fairseq(const std::string& path, const FairseqImportOptions& options = {});
// "" when `tensors` hold no ema.* average, else the line callers print about it.
std::string ema_kept_note(const NamedTensors& tensors);

}  // namespace stretch::models
