// models/fairseq/fairseq_import_span.h — the adaptive_span part of import_fairseq()
// (fairseq_import.h): a checkpoint fairseq 0.12.2's examples/adaptive_span wrote
// (`--user-dir examples/adaptive_span --arch adaptive_span`) → stretch's adaptive_span family.
// Contract:
//   * Config: cfg.model's AdaptiveSpanSmallConfig keys map one to one (d_model, n_head, d_inner,
//     n_layer, attn_span, dropout, emb_dropout, adapt_span_ramp, adapt_span_init, aux_loss_scaler,
//     adapt_span_layer); vocab_size is fairseq's unused default (the decoder takes V from the
//     dictionary; so does the import, from decoder.model.in_emb.weight's rows); tokens_per_sample
//     comes from the task config (truncated_bptt_lm). Other keys are reported, never guessed.
//   * Tensors: fairseq's state-dict names are stretch's parameter names (adaptive_span_lm.h), each
//     checked for its shape; the per-layer buffer attn.attn.adaptive_span._mask.mask_template [L]
//     must be linspace(1 − L, 0, L) (AdaptiveMask's constant; stretch computes it) and is dropped.
//     Any other entry, a missing one or a non-finite value is an error naming the tensor.
//   * The model evaluates as fairseq built it: the port's semantics (no renormalisation, z clamped
//     in the forward), so adapt_span_renormalise / adapt_span_clamp keep their defaults.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/fairseq/fairseq_import.h"
#include "tensor/torch_file.h"

namespace stretch::models {

struct SpanImportSource {
  const TorchFile* file = nullptr;
  nlohmann::json model = nlohmann::json::object();  // cfg.model (or the argparse args)
  nlohmann::json task = nlohmann::json::object();   // cfg.task (or the argparse args)
  bool namespace_config = false;                    // args: every group flattened (report no unknown keys)
  std::map<std::string, const pickle::Value*> state{};  // fairseq name → Tensor value
};

// Fills out.config, out.tensors and out.notes (the first note is the summary line).
void import_fairseq_adaptive_span(const std::string& path, const SpanImportSource& source,
                                  const FairseqImportOptions& options, FairseqImport& out);

}  // namespace stretch::models
