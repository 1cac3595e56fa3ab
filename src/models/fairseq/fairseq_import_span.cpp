// models/fairseq/fairseq_import_span.cpp — see fairseq_import_span.h.
#include "models/fairseq/fairseq_import_span.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "models/adaptive_span/adaptive_span_lm.h"

namespace stretch::models {
namespace {

const char* kHint = "stretch imports fairseq's examples/adaptive_span checkpoints (docs/fairseq.md, Adaptive Span)";

// AdaptiveSpanSmallConfig's fields (adaptive_span_model_wrapper.py) that set the model.
const std::set<std::string> kMapped = {"d_model", "n_head", "d_inner", "n_layer", "attn_span", "dropout",
                                       "emb_dropout", "adapt_span_ramp", "adapt_span_init", "aux_loss_scaler",
                                       "adapt_span_layer"};
// Known and not needed: the name, and vocab_size (fairseq builds V from the dictionary, not from it).
const std::set<std::string> kIgnored = {"_name", "arch", "vocab_size"};

const std::string kMaskTemplate = "attn.attn.adaptive_span._mask.mask_template";

}  // namespace

void import_fairseq_adaptive_span(const std::string& path, const SpanImportSource& src,
                                  const FairseqImportOptions& options, FairseqImport& out) {
  if (!options.pos.empty())
    fail_usage("--pos " + options.pos + ": " + path + " is an adaptive_span checkpoint, which has no position method",
               "omit --pos (it is for the ALiBi fork's transformer_lm checkpoints)");
  const nlohmann::json& m = src.model;
  nlohmann::json given = nlohmann::json::object();
  std::vector<std::string> unknown;
  for (auto& [key, value] : m.items()) {
    if (kMapped.count(key)) {
      if (value.is_null()) continue;  // fairseq's default applies (stretch's defaults are the same)
      if (!value.is_number() && !value.is_boolean())
        fail_input(path, "model config key '" + key + "' is " + value.dump() + ", not a number", kHint);
      given[key] = value;
    } else if (!kIgnored.count(key) && !src.namespace_config) {
      unknown.push_back(key + "=" + value.dump());
    }
  }
  if (src.task.is_object() && src.task.contains("tokens_per_sample") && src.task["tokens_per_sample"].is_number_integer())
    given["tokens_per_sample"] = src.task["tokens_per_sample"];

  // V from the embedding (AdaptiveSpanDecoder passes len(task.target_dictionary)).
  auto entry = src.state.find("decoder.model.in_emb.weight");
  if (entry == src.state.end())
    fail_input(path, "state dict has no 'decoder.model.in_emb.weight' (not an adaptive_span model?)", kHint);
  const auto& emb_shape = entry->second->tensor.shape;
  if (emb_shape.size() != 2 || emb_shape[0] < 1)
    fail_input(path, "decoder.model.in_emb.weight has rank " + std::to_string(emb_shape.size()) + ", expected [V, C]",
               kHint);
  given["vocab_size"] = emb_shape[0];
  given["padding_idx"] = 1;  // fairseq's Dictionary: <s> <pad> </s> <unk>

  AdaptiveSpanConfig c;
  try {
    c.apply_overrides(given, "the checkpoint's model config");
    c.validate();
  } catch (const Error& e) {
    fail_input(path, std::string("its config does not describe a model fairseq can build: ") + e.what(), kHint);
  }

  // The stretch model's parameters name what the state dict must hold (same names, same shapes).
  const AdaptiveSpanLM model(c);
  std::set<std::string> used;
  for (const auto& [name, var] : model.params().items()) {
    auto it = src.state.find(name);
    if (it == src.state.end()) fail_input(path, "state dict has no '" + name + "' (the config needs it)", kHint);
    Tensor t = src.file->to_f32(it->second->tensor, name);
    if (t.shape() != var.value().shape())
      fail_input(path, name + " is " + t.shape().str() + ", expected " + var.value().shape().str() + " (d_model " +
                           std::to_string(c.d_model) + ", n_head " + std::to_string(c.n_head) + ", attn_span " +
                           std::to_string(c.attn_span) + ")", kHint);
    if (!std::all_of(t.f32(), t.f32() + t.numel(), [](float x) { return std::isfinite(x); }))
      fail_input(path, "tensor '" + name + "' holds NaN or infinite values", "the checkpoint is damaged; use another one");
    used.insert(name);
    out.tensors.emplace_back(name, std::move(t));
  }
  // AdaptiveMask's buffer: torch.linspace(1 - L, 0, steps=L), a constant of the config.
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string name = "decoder.model.layers." + std::to_string(l) + "." + kMaskTemplate;
    auto it = src.state.find(name);
    if (it == src.state.end()) continue;  // a buffer: stretch needs none
    Tensor t = src.file->to_f32(it->second->tensor, name);
    const int64_t L = c.attn_span;
    bool ok = t.shape() == Shape{L};
    for (int64_t i = 0; ok && i < L; ++i) {
      const double want = L == 1 ? 0.0 : (1.0 - static_cast<double>(L)) * (1.0 - static_cast<double>(i) / (L - 1));
      ok = std::abs(t.f32()[i] - want) <= 1e-4 * std::max(1.0, std::abs(want));
    }
    if (!ok)
      fail_input(path, name + " is not linspace(1 - attn_span, 0, attn_span) with attn_span " + std::to_string(L),
                 "the buffer is AdaptiveMask's constant; a different one means a model stretch does not have");
    used.insert(name);
  }
  for (const auto& [name, v] : src.state)
    if (!used.count(name))
      fail_input(path, "state dict entry '" + name + "' has no place in the model its config describes", kHint);

  if (!unknown.empty()) {
    std::string s = "model config keys stretch does not know (not used; check they do not change the model):";
    for (const auto& u : unknown) s += " " + u;
    out.notes.push_back(s);
  }
  out.config = c.to_json();
  int64_t params = 0;
  for (const auto& [name, t] : out.tensors) params += t.numel();
  out.notes.insert(out.notes.begin(),
                   "fairseq adaptive_span (" + out.container + " container), " + std::to_string(params) +
                       " parameters, " + std::to_string(c.n_layer) + " layers, d_model " + std::to_string(c.d_model) +
                       ", attn_span " + std::to_string(c.attn_span) + ", spans per " +
                       (c.adapt_span_layer ? "layer" : "head") + " (fairseq's port: no renormalisation, z clamped in "
                       "the forward); evaluate with --task truncated_bptt_lm");
}

}  // namespace stretch::models
