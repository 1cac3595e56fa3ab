// models/fairseq/fairseq_export.h — a stretch transformer_lm, adaptive_span or transformer_xl → a checkpoint fairseq-eval-lm loads.
// Contract: writes torch's zip container (tensor/torch_file.h: "<stem>/data.pkl", "version",
// "data/<k>") holding {"args": argparse.Namespace(arch, task, criterion and every model key
// fairseq's transformer_lm reads, with stretch's values), "model": the state dict under fairseq's
// names (tied output: output_projection.weight shares the embedding's storage; sinusoidal
// positions: the _float_tensor buffer), "optimizer_history", "extra_state"}. The argparse form is
// used because fairseq fills every option it does not find from its own defaults
// (convert_namespace_to_omegaconf), so the file needs no copy of fairseq's config tree.
// Positions fairseq has no module for (alibi, rope, t5) are a usage error naming --pos.
// adaptive_span models export as examples/adaptive_span checkpoints (args: arch adaptive_span, task
// truncated_bptt_lm, criterion adaptive_span_loss, AdaptiveSpanSmallConfig's keys; the state dict
// plus each layer's mask_template buffer); fairseq-eval-lm loads them with --user-dir
// examples/adaptive_span. The original's switches (--adapt-span-renormalise, --adapt-span-clamp
// after_step) have no fairseq counterpart: a usage error naming the flag.
// transformer_xl models export as examples/truncated_bptt checkpoints (args: arch transformer_xl,
// task truncated_bptt_lm, criterion cross_entropy, TransformerXLConfig's keys with cutoffs as a
// list; the state dict plus HF's second names of the tied tensors, crit.out_layers.{i}.weight and
// crit.out_projs.{i>=1}, over the same storage, and the pos_emb.inv_freq buffer); fairseq-eval-lm
// loads them with --user-dir examples/truncated_bptt. --xl-original and a shared r pair have no
// fairseq counterpart: a usage error.
#pragma once
#include <string>

#include "models/language_model.h"
#include "tensor/safetensors.h"

namespace stretch::models {

// `ema` (names without "ema.", e.g. from a `stretch train --store-ema` checkpoint): written as
// extra_state["ema"], the same state dict with the moving averages, as fairseq-train --store-ema saves it.
void export_fairseq(const LanguageModel& model, const std::string& path, const NamedTensors* ema = nullptr);

}  // namespace stretch::models
