// models/fairseq/fairseq_import.cpp — see fairseq_import.h. The transformer_lm mapping tables are
// kTransformerLm and kTransformerLmAdaptive below; transformer_xl is import_transformer_xl() (its stretch
// parameters carry the fairseq names); adaptive_span has its own file (fairseq_import_span.h).
#include "models/fairseq/fairseq_import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"
#include "models/fairseq/fairseq_import_span.h"
#include "models/registry.h"
#include "models/transformer_lm/config.h"
#include "models/transformer_xl/config.h"
#include "nn/vocab_bands.h"
#include "tensor/torch_file.h"

namespace stretch::models {
namespace {

using pickle::Kind;
using pickle::Value;

const char* kHint = "stretch imports fairseq transformer_lm checkpoints (docs/fairseq.md lists what maps)";

// A Python value from a checkpoint's config as JSON (what the field tables read).
nlohmann::json to_json(const Value& v) {
  switch (v.kind) {
    case Kind::None: return nullptr;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.s.empty() ? nlohmann::json(v.i) : nlohmann::json(v.repr());
    case Kind::Float: return v.f;
    case Kind::String: return v.s;
    case Kind::List: case Kind::Tuple: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : v.items) a.push_back(to_json(*x));
      return a;
    }
    case Kind::Dict: case Kind::Object: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, x] : v.dict)
        if (k->kind == Kind::String) o[k->s] = to_json(*x);
      return o;
    }
    default: return v.repr();
  }
}

// The mapping of one family. Keys of the fairseq model config:
//   mapped     read by convert() below;
//   neutral    a feature stretch lacks: the value must be the listed one (else an error);
//   ignored    training-only or evaluation-irrelevant (dropouts, checkpointing, sharding).
struct FamilyMapping {
  std::vector<std::string> archs{};
  std::set<std::string> mapped{};
  std::vector<std::pair<std::string, nlohmann::json>> neutral{};
  std::set<std::string> ignored{};
};

// What every transformer_lm variant shares; the two tables below add their own keys.
const FamilyMapping kTransformerLmCommon = {
    .archs = {"transformer_lm", "transformer_lm_big", "transformer_lm_baevski_wiki103", "transformer_lm_wiki103",
              "transformer_lm_gbw", "transformer_lm_baevski_gbw", "transformer_lm_gpt", "transformer_lm_gpt2_small",
              "transformer_lm_gpt2_tiny", "transformer_lm_gpt2_medium", "transformer_lm_gpt2_big"},
    .mapped = {"_name", "arch", "activation_fn", "dropout", "attention_dropout", "activation_dropout", "relu_dropout",
               "decoder_embed_dim", "decoder_output_dim", "decoder_input_dim", "decoder_ffn_embed_dim",
               "decoder_layers", "decoder_attention_heads", "decoder_normalize_before", "no_decoder_final_norm",
               "no_token_positional_embeddings", "share_decoder_input_output_embed", "decoder_learned_pos",
               "no_scale_embedding", "layernorm_embedding", "tokens_per_sample", "max_target_positions", "max_tokens",
               "add_bos_token", "decoder_layerdrop", "scale_fc", "scale_attn", "scale_heads", "scale_resids"},
    .neutral = {{"character_embeddings", false},
                {"decoder_layers_to_keep", nullptr},    {"base_layers", 0},
                {"decoder_xformers_att_config", nullptr},
                {"cross_self_attention", false},        {"quant_noise_pq", 0.0},
                {"quant_noise_scalar", 0.0}},
    .ignored = {"character_filters", "character_embedding_dim", "char_embedder_highway_layers", "checkpoint_activations",
                "offload_activations", "quant_noise_pq_block_size", "min_params_to_wrap",
                "base_sublayers", "base_shuffle", "tpu"},
};

FamilyMapping extend(FamilyMapping m, const std::vector<std::string>& mapped,
                     const std::vector<std::pair<std::string, nlohmann::json>>& neutral,
                     const std::vector<std::string>& ignored) {
  m.mapped.insert(mapped.begin(), mapped.end());
  m.neutral.insert(m.neutral.end(), neutral.begin(), neutral.end());
  m.ignored.insert(ignored.begin(), ignored.end());
  return m;
}

// A full-softmax transformer_lm with one embedding table: the adaptive modules must be off.
const FamilyMapping kTransformerLm = extend(
    kTransformerLmCommon, {},
    {{"adaptive_softmax_cutoff", nullptr}, {"adaptive_input", false}, {"tie_adaptive_weights", false}},
    {"adaptive_softmax_dropout", "adaptive_softmax_factor", "adaptive_input_factor", "adaptive_input_cutoff",
     "tie_adaptive_proj"});

// transformer_lm_wiki103 (= transformer_lm_baevski_wiki103) and any transformer_lm with adaptive
// input and/or an adaptive softmax (fairseq's modules/adaptive_input.py, adaptive_softmax.py):
//   decoder.embed_tokens.embeddings.{i}.0.weight [size_i, d_i], .1.weight [C, d_i]   (input band i)
//   decoder.adaptive_softmax.head.weight [c_0 + k − 1, C]                            (untied)
//   decoder.adaptive_softmax.head.class_proj.weight [k − 1, C]                       (tied)
//   decoder.adaptive_softmax.head.word_proj.weight = embeddings.0.0.weight           (tied: a second name)
//   decoder.adaptive_softmax.tail.{i−1}.0.weight [d_i, C] (tie_proj: = embeddings.{i}.1.weight [C, d_i])
//   decoder.adaptive_softmax.tail.{i−1}.2.weight [size_i, d_i] (tied: = embeddings.{i}.0.weight)
// and the buffers decoder.embed_tokens._float_tensor, decoder.adaptive_softmax.head._float_tensor
// (TiedHeadModule) and decoder.adaptive_softmax.version.
const FamilyMapping kTransformerLmAdaptive = extend(
    kTransformerLmCommon,
    {"adaptive_input", "adaptive_input_factor", "adaptive_input_cutoff", "adaptive_softmax_cutoff",
     "adaptive_softmax_dropout", "adaptive_softmax_factor", "tie_adaptive_weights", "tie_adaptive_proj"},
    {}, {});

bool is_neutral(const nlohmann::json& got, const nlohmann::json& want) {
  if (got.is_null()) return want.is_null() || want == false || want == 0;
  if (want.is_boolean()) return (got.is_boolean() && got == want) || (got.is_number() && (got != 0) == want.get<bool>());
  if (want.is_number()) return got.is_number() && got.get<double>() == want.get<double>();
  return false;
}

double num(const nlohmann::json& m, const std::string& key, double dflt) {
  auto it = m.find(key);
  return it == m.end() || it->is_null() ? dflt : it->get<double>();
}
bool flag(const nlohmann::json& m, const std::string& key, bool dflt) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return dflt;
  return it->is_boolean() ? it->get<bool>() : it->get<double>() != 0;
}

// A cutoff list as fairseq's eval_str_list reads it ("20000,60000", "[20000, 60000]", a list or
// None) → stretch's "20000,60000" ("" for None).
std::string cutoff_text(const std::string& path, const nlohmann::json& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return "";
  std::vector<int64_t> v;
  if (it->is_array()) {
    for (const auto& x : *it) {
      if (!x.is_number_integer()) fail_input(path, "model config key '" + key + "' is " + it->dump() + ", not a list of integers", kHint);
      v.push_back(x.get<int64_t>());
    }
  } else if (it->is_string()) {
    const std::string s = it->get<std::string>();
    std::string digits;
    for (char ch : s + ",") {
      if (ch >= '0' && ch <= '9') {
        digits += ch;
      } else if (ch == ',' || ch == ']' || ch == ')') {
        if (!digits.empty()) v.push_back(std::stoll(digits));
        digits.clear();
      } else if (ch != ' ' && ch != '[' && ch != '(') {
        fail_input(path, "model config key '" + key + "' is '" + s + "', not a comma-separated list of integers", kHint);
      }
    }
  } else {
    fail_input(path, "model config key '" + key + "' is " + it->dump() + ", not a list of integers", kHint);
  }
  std::string out;
  for (int64_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

struct StateDict {
  std::map<std::string, const Value*> tensors;  // fairseq name → Tensor value
  std::set<std::string> used;
};

// fairseq's examples/truncated_bptt transformer_xl (TransformerXLConfig → HF's TransfoXLConfig with
// d_embed = d_model; REFERENCE.md §6.6). Every stretch parameter has the fairseq state-dict name
// already (decoder.model.transformer.*, decoder.model.crit.*), so the model stretch builds from
// the config says which tensors must be there and with which shapes. HF saves each tied tensor
// again under its second name (one storage): crit.out_layers.{i}.weight = word_emb.emb_layers.{i}.weight,
// crit.out_projs.{i} = word_emb.emb_projs.{i} for i >= 1 (div_val > 1); those must be equal and
// stretch keeps one. The buffer transformer.pos_emb.inv_freq [d_model/2] must be 10000^(−2k/C).
const std::set<std::string> kXlMapped = {"_name", "arch", "cutoffs", "d_model", "n_head", "d_head", "d_inner",
                                         "div_val", "n_layer", "mem_len", "clamp_len", "same_length", "dropout",
                                         "dropatt", "max_target_positions"};
const std::set<std::string> kXlIgnored = {"checkpoint_activations", "offload_activations"};

FairseqImport import_transformer_xl(const std::string& path, TorchFile& file, const nlohmann::json& m,
                                    const nlohmann::json& task, const Value& model_sd, FairseqImport out) {
  const char* hint = "stretch imports fairseq transformer_xl checkpoints of examples/truncated_bptt (docs/fairseq.md)";
  std::vector<std::string> unknown;
  for (auto& [key, value] : m.items())
    if (!kXlMapped.count(key) && !kXlIgnored.count(key)) unknown.push_back(key + "=" + value.dump());
  if (!unknown.empty()) {
    std::string s = "model config keys stretch does not know (not used; check they do not change the model):";
    for (const auto& u : unknown) s += " " + u;
    out.notes.push_back(s);
  }
  StateDict sd;
  for (const auto& [k, v] : model_sd.dict) {
    if (k->kind != Kind::String) fail_input(path, "state dict key " + k->repr() + " is not a string", hint);
    if (v->kind != Kind::Tensor) fail_input(path, "state dict entry '" + k->s + "' is a " + pickle::kind_name(v->kind), hint);
    sd.tensors[k->s] = v.get();
  }
  auto take = [&](const std::string& name) -> Tensor {
    auto it = sd.tensors.find(name);
    if (it == sd.tensors.end()) fail_input(path, "state dict has no '" + name + "' (the config needs it)", hint);
    sd.used.insert(name);
    return file.to_f32(it->second->tensor, name);
  };
  const std::string top = "decoder.model.transformer.", crit = "decoder.model.crit.";
  auto integer = [&](const char* key) {
    if (num(m, key, -1) <= 0) fail_input(path, std::string("model config has no positive '") + key + "'", hint);
    return static_cast<int64_t>(num(m, key, -1));
  };
  TransformerXLConfig c = transformer_xl_preset("transformer_xl");
  c.n_layer = integer("n_layer");
  c.d_model = integer("d_model");
  c.n_head = integer("n_head");
  c.d_head = integer("d_head");
  c.d_inner = integer("d_inner");
  c.div_val = static_cast<int64_t>(num(m, "div_val", 1));
  c.mem_len = static_cast<int64_t>(num(m, "mem_len", 0));
  c.clamp_len = static_cast<int64_t>(num(m, "clamp_len", -1));
  c.same_length = flag(m, "same_length", false);
  c.dropout = static_cast<float>(num(m, "dropout", 0.0));
  c.dropatt = static_cast<float>(num(m, "dropatt", 0.0));
  c.cutoffs = cutoff_text(path, m, "cutoffs");
  c.untie_r = !sd.tensors.count(top + "r_w_bias");  // HF's untie_r = False keeps one pair at the top
  const double tps = task.is_object() ? num(task, "tokens_per_sample", -1) : -1;
  c.tokens_per_sample = static_cast<int64_t>(tps > 0 ? tps : num(m, "max_target_positions", 512));
  c.max_target_positions = static_cast<int64_t>(num(m, "max_target_positions", static_cast<double>(c.tokens_per_sample)));
  const std::string emb0 = top + "word_emb.emb_layers.0.weight";
  if (!sd.tensors.count(emb0)) fail_input(path, "state dict has no '" + emb0 + "'", hint);
  int64_t V = 0;  // the bands' rows add up to V
  for (int64_t i = 0; sd.tensors.count(top + "word_emb.emb_layers." + std::to_string(i) + ".weight"); ++i) {
    const auto& shape = sd.tensors[top + "word_emb.emb_layers." + std::to_string(i) + ".weight"]->tensor.shape;
    if (shape.size() != 2) fail_input(path, "word_emb.emb_layers." + std::to_string(i) + ".weight is not a matrix", hint);
    V += shape[0];
  }
  c.vocab_size = V;
  c.padding_idx = 1;
  std::unique_ptr<LanguageModel> model;
  try {
    model = build_model(c.to_json());
  } catch (const Error& e) {
    fail_input(path, std::string("its config does not describe a model fairseq can build: ") + e.what(), hint);
  }
  NamedTensors& t = out.tensors;
  for (const auto& [name, v] : model->params().items()) {
    Tensor x = take(name);
    if (x.shape() != v.shape())
      fail_input(path, name + " is " + x.shape().str() + ", expected " + v.shape().str() + " (d_model " +
                           std::to_string(c.d_model) + ", div_val " + std::to_string(c.div_val) + ", cutoffs " +
                           c.cutoffs + ")", hint);
    t.emplace_back(name, x);
  }
  auto find_taken = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, x] : t)
      if (n == name) return x;
    fail_input(path, "state dict has no '" + name + "'", hint);
  };
  auto same_as = [&](const std::string& name, const std::string& original_name) {
    const Tensor o = take(name);
    const Tensor& original = find_taken(original_name);
    if (o.shape() != original.shape() || !std::equal(o.f32(), o.f32() + o.numel(), original.f32()))
      fail_input(path, name + " should be " + original_name + " (tied) but differs from it", hint);
  };
  const int64_t bands = static_cast<int64_t>(c.kept_cutoffs().size()) + 1;
  for (int64_t i = 0; i < (c.div_val == 1 ? 1 : bands); ++i) {
    const std::string n = std::to_string(i);
    same_as(crit + "out_layers." + n + ".weight", top + "word_emb.emb_layers." + n + ".weight");
    if (c.div_val > 1 && i > 0) same_as(crit + "out_projs." + n, top + "word_emb.emb_projs." + n);
  }
  const Tensor inv = take(top + "pos_emb.inv_freq");  // HF's buffer: 1 / 10000^(2k/C)
  bool inv_ok = inv.numel() == c.d_model / 2;
  for (int64_t k = 0; inv_ok && k < inv.numel(); ++k)
    inv_ok = std::abs(inv.f32()[k] - 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(k) / c.d_model)) <= 1e-6;
  if (!inv_ok) fail_input(path, top + "pos_emb.inv_freq is not HF's 1 / 10000^(2k/d_model)", hint);
  for (const auto& [name, v] : sd.tensors)
    if (!sd.used.count(name))
      fail_input(path, "state dict entry '" + name + "' has no place in the model its config describes", hint);
  for (const auto& [name, v] : t)
    if (v.numel() > 0 && !std::all_of(v.f32(), v.f32() + v.numel(), [](float x) { return std::isfinite(x); }))
      fail_input(path, "tensor '" + name + "' holds NaN or infinite values", "the checkpoint is damaged; use another one");
  out.config = c.to_json();
  int64_t params = 0;
  for (const auto& [name, v] : t) params += v.numel();
  out.notes.insert(out.notes.begin(), "fairseq transformer_xl (" + file.container + " container), " +
                                          std::to_string(params) + " parameters, V " + std::to_string(V) +
                                          (bands > 1 ? ", adaptive softmax " + c.cutoffs + " div_val " +
                                                           std::to_string(c.div_val)
                                                     : ", full softmax") +
                                          ", mem_len " + std::to_string(c.mem_len));
  return out;
}

}  // namespace

// The model of `path` (its root dict checked by import_fairseq) from the state dict `model_sd`: the
// checkpoint's "model", or extra_state["ema"] (the same model's moving average).
FairseqImport import_state_dict(const std::string& path, TorchFile& file, const Value* model_sd,
                                const FairseqImportOptions& options) {
  const Value& root = *file.root;
  FairseqImport out;
  out.container = file.container;
  // The model config: cfg.model (a dict, or a Namespace in fairseq 1.0 pre-releases) or args.
  nlohmann::json m, task;
  const Value* cfg = root.get("cfg");
  const Value* args = root.get("args");
  if (cfg && cfg->kind == Kind::Dict && cfg->get("model") && cfg->get("model")->kind != Kind::None) {
    m = to_json(*cfg->get("model"));
    if (const Value* t = cfg->get("task")) task = to_json(*t);
    out.notes.push_back("config from cfg.model");
  } else if (args && args->kind == Kind::Object) {
    m = to_json(*args);
    task = m;
    out.notes.push_back("config from the argparse-era args Namespace");
  } else {
    fail_input(path, "has neither cfg.model nor args (no model config)", kHint);
  }
  if (!m.is_object()) fail_input(path, "model config is not a dict", kHint);
  out.fairseq_arch = m.contains("arch") && m["arch"].is_string() ? m["arch"].get<std::string>()
                     : m.contains("_name") && m["_name"].is_string() ? m["_name"].get<std::string>()
                                                                       : "";
  if (task.is_object() && task.contains("data") && task["data"].is_string()) out.task_data = task["data"];
  if (out.fairseq_arch == "transformer_xl") return import_transformer_xl(path, file, m, task, *model_sd, std::move(out));
  const bool namespace_config = args && !(cfg && cfg->kind == Kind::Dict && cfg->get("model"));

  if (out.fairseq_arch == "adaptive_span") {  // examples/adaptive_span (fairseq_import_span.h)
    SpanImportSource span{.file = &file, .model = m, .task = task, .namespace_config = namespace_config};
    for (const auto& [k, v] : model_sd->dict) {
      if (k->kind != Kind::String) fail_input(path, "state dict key " + k->repr() + " is not a string", kHint);
      if (v->kind != Kind::Tensor) fail_input(path, "state dict entry '" + k->s + "' is a " + pickle::kind_name(v->kind), kHint);
      span.state[k->s] = v.get();
    }
    import_fairseq_adaptive_span(path, span, options, out);
    return out;
  }

  const bool adaptive = flag(m, "adaptive_input", false) || !cutoff_text(path, m, "adaptive_softmax_cutoff").empty();
  const FamilyMapping& map = adaptive ? kTransformerLmAdaptive : kTransformerLm;
  if (std::find(map.archs.begin(), map.archs.end(), out.fairseq_arch) == map.archs.end())
    fail_input(path, "fairseq arch '" + out.fairseq_arch + "' is not imported yet",
               "stretch imports the transformer_lm family (" + std::to_string(map.archs.size()) +
                   " arch names) and adaptive_span");
  for (const auto& [key, want] : map.neutral) {
    auto it = m.find(key);
    if (it != m.end() && !is_neutral(*it, want))
      fail_input(path, "model config key '" + key + "' is " + it->dump() + ": stretch's transformer_lm has no such feature",
                 "only checkpoints with " + key + " = " + want.dump() + " import today");
  }
  // Argparse-era args hold every option of every group: only keys that look like model options
  // (decoder_*, *_embed*, adaptive_*) and are unknown are worth reporting.
  std::vector<std::string> unknown;
  std::set<std::string> neutral_keys;
  for (const auto& [k, v] : map.neutral) neutral_keys.insert(k);
  for (auto& [key, value] : m.items()) {
    if (map.mapped.count(key) || map.ignored.count(key) || neutral_keys.count(key)) continue;
    if (namespace_config && key.find("decoder") == std::string::npos && key.find("embed") == std::string::npos &&
        key.find("adaptive") == std::string::npos && key.find("alibi") == std::string::npos)
      continue;
    unknown.push_back(key + "=" + value.dump());
  }
  if (!unknown.empty()) {
    std::string s = "model config keys stretch does not know (not used; check they do not change the model):";
    for (const auto& u : unknown) s += " " + u;
    out.notes.push_back(s);
  }

  StateDict sd;
  for (const auto& [k, v] : model_sd->dict) {
    if (k->kind != Kind::String) fail_input(path, "state dict key " + k->repr() + " is not a string", kHint);
    if (v->kind != Kind::Tensor) fail_input(path, "state dict entry '" + k->s + "' is a " + pickle::kind_name(v->kind), kHint);
    sd.tensors[k->s] = v.get();
  }
  auto take = [&](const std::string& name) -> Tensor {
    auto it = sd.tensors.find(name);
    if (it == sd.tensors.end()) fail_input(path, "state dict has no '" + name + "' (the config needs it)", kHint);
    sd.used.insert(name);
    return file.to_f32(it->second->tensor, name);
  };
  auto has = [&](const std::string& name) { return sd.tensors.count(name) > 0; };

  // --- config ---
  TransformerLMConfig c = preset("transformer_lm");
  c.arch = "transformer_lm";
  c.decoder_layers = static_cast<int64_t>(num(m, "decoder_layers", -1));
  c.decoder_embed_dim = static_cast<int64_t>(num(m, "decoder_embed_dim", -1));
  c.decoder_ffn_embed_dim = static_cast<int64_t>(num(m, "decoder_ffn_embed_dim", -1));
  c.decoder_attention_heads = static_cast<int64_t>(num(m, "decoder_attention_heads", -1));
  for (const char* k : {"decoder_layers", "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads"})
    if (num(m, k, -1) <= 0) fail_input(path, std::string("model config has no positive '") + k + "'", kHint);
  const int64_t C = c.decoder_embed_dim;
  const int64_t in_dim = static_cast<int64_t>(num(m, "decoder_input_dim", static_cast<double>(C)));
  const int64_t out_dim = static_cast<int64_t>(num(m, "decoder_output_dim", static_cast<double>(C)));
  if (in_dim <= 0 || out_dim <= 0)
    fail_input(path, "decoder_input_dim " + std::to_string(in_dim) + " / decoder_output_dim " + std::to_string(out_dim) +
                         " must be positive", kHint);
  c.decoder_input_dim = in_dim == C ? 0 : in_dim;  // 0: = C (stretch's default)
  c.decoder_output_dim = out_dim == C ? 0 : out_dim;
  c.decoder_normalize_before = flag(m, "decoder_normalize_before", false);
  c.no_decoder_final_norm = flag(m, "no_decoder_final_norm", false);
  c.share_decoder_input_output_embed = flag(m, "share_decoder_input_output_embed", false);
  c.no_scale_embedding = flag(m, "no_scale_embedding", false);
  c.layernorm_embedding = flag(m, "layernorm_embedding", false);
  c.scale_heads = flag(m, "scale_heads", false);
  c.scale_attn = flag(m, "scale_attn", false);
  c.scale_fc = flag(m, "scale_fc", false);
  c.scale_resids = flag(m, "scale_resids", false);
  // fairseq 0.12.2's transformer_lm records --scale-* in its config but builds no NormFormer (its
  // TransformerConfig.from_namespace drops a DictConfig's extra keys; docs/fairseq.md): a flag whose
  // tensors the state dict lacks was not part of the model fairseq trained, so it is imported off.
  for (auto& [on, key, tensor] : {std::tuple{&c.scale_heads, "scale_heads", "c_attn"},
                                  std::tuple{&c.scale_attn, "scale_attn", "attn_ln.weight"},
                                  std::tuple{&c.scale_fc, "scale_fc", "ffn_layernorm.weight"},
                                  std::tuple{&c.scale_resids, "scale_resids", "w_resid"}})
    if (*on && !has(std::string("decoder.layers.0.") + tensor)) {
      *on = false;
      std::string flag_name = std::string("--") + key;
      std::replace(flag_name.begin(), flag_name.end(), '_', '-');
      out.notes.push_back(std::string(key) + " is set but the state dict has no decoder.layers.0." + tensor +
                          ": fairseq 0.12.2's transformer_lm ignores " + flag_name + " (the model it trained has "
                          "none), so it is imported off");
    }
  // fairseq's task flag (the model config mirrors it: II("task.add_bos_token")); either says it.
  c.add_bos_token = flag(m, "add_bos_token", false) || (task.is_object() && flag(task, "add_bos_token", false));
  c.dropout = static_cast<float>(num(m, "dropout", 0.1));
  c.attention_dropout = static_cast<float>(num(m, "attention_dropout", 0.0));
  c.activation_dropout = static_cast<float>(num(m, "activation_dropout", num(m, "relu_dropout", 0.0)));
  c.decoder_layerdrop = static_cast<float>(num(m, "decoder_layerdrop", 0.0));
  c.tokens_per_sample = static_cast<int64_t>(num(m, "tokens_per_sample", 512));
  const std::string act = m.contains("activation_fn") && m["activation_fn"].is_string() ? m["activation_fn"].get<std::string>() : "relu";
  const auto activation = ops::activation_from_name(act);
  if (!activation)
    fail_input(path, "activation_fn '" + act + "' is not one stretch has", "stretch has " + ops::activation_choices());
  c.activation_fn = *activation;
  const bool no_pos = flag(m, "no_token_positional_embeddings", false);
  const bool learned = flag(m, "decoder_learned_pos", false);
  c.pos = no_pos ? PosMethod::None : learned ? PosMethod::Learned : PosMethod::Sinusoidal;
  const bool fork_trace = m.contains("max_tokens") && c.pos == PosMethod::Sinusoidal;
  if (options.pos == "alibi") {
    if (c.pos != PosMethod::Sinusoidal)
      fail_usage("--pos alibi: " + path + " has " + pos_method_name(c.pos) + " positions, not the ALiBi fork's sinusoidal entry",
                 "--pos alibi is for checkpoints of the ALiBi fork (sinusoidal embed_positions kept but unused)");
    c.pos = PosMethod::Alibi;
    out.notes.push_back(std::string("positions: ALiBi (--pos alibi); the stored sinusoidal embed_positions entry is not "
                                    "used") +
                        (fork_trace ? "; the model config has 'max_tokens', the ALiBi fork's trace"
                                    : "; the model config has no 'max_tokens' (the ALiBi fork's trace): check that "
                                      "this is an ALiBi-fork checkpoint"));
  } else if (!options.pos.empty()) {
    fail_usage("--pos '" + options.pos + "': import takes only --pos alibi", "omit --pos to keep the stored positions");
  } else if (fork_trace) {
    out.notes.push_back(
        "positions: sinusoidal, as stored. The model config has 'max_tokens', which the ALiBi fork's decoder reads: if "
        "this is an ALiBi-fork checkpoint, import it with --pos alibi");
  }

  // Adaptive input / softmax (kTransformerLmAdaptive): the band layout from the config, V from the tensors.
  if (adaptive) {
    c.adaptive_input = flag(m, "adaptive_input", false);
    c.adaptive_input_factor = static_cast<float>(num(m, "adaptive_input_factor", 4.0));
    c.adaptive_input_cutoff = cutoff_text(path, m, "adaptive_input_cutoff");
    c.adaptive_softmax_cutoff = cutoff_text(path, m, "adaptive_softmax_cutoff");
    c.adaptive_softmax_dropout = static_cast<float>(num(m, "adaptive_softmax_dropout", 0.0));
    c.adaptive_softmax_factor = static_cast<float>(num(m, "adaptive_softmax_factor", 4.0));
    c.tie_adaptive_weights = flag(m, "tie_adaptive_weights", false);
    c.tie_adaptive_proj = flag(m, "tie_adaptive_proj", false);
    if (c.adaptive_input && c.adaptive_input_cutoff.empty())
      fail_input(path, "model config has adaptive_input but no adaptive_input_cutoff", kHint);
    if (c.has_adaptive_softmax() && c.share_decoder_input_output_embed) {
      out.notes.push_back("share_decoder_input_output_embed has no effect with an adaptive softmax (as in fairseq)");
      c.share_decoder_input_output_embed = false;
    }
    if (!c.tie_adaptive_weights) c.tie_adaptive_proj = false;  // fairseq reads it only with tied weights
    // fairseq's criterion (cfg.criterion._name / args.criterion): adaptive_loss trains differently.
    const Value* crit = cfg && cfg->kind == Kind::Dict ? cfg->get("criterion") : nullptr;
    const nlohmann::json cj = crit ? to_json(*crit) : namespace_config ? m : nlohmann::json::object();
    const std::string cname = cj.contains("_name") && cj["_name"].is_string()       ? cj["_name"].get<std::string>()
                              : cj.contains("criterion") && cj["criterion"].is_string() ? cj["criterion"].get<std::string>()
                                                                                    : "";
    if (cname == "adaptive_loss" && c.has_adaptive_softmax()) c.criterion = Criterion::AdaptiveLoss;
  }
  c.padding_idx = 1;  // fairseq's Dictionary: <s> <pad> </s> <unk>
  NamedTensors& t = out.tensors;
  Tensor emb;  // [V, C] (no adaptive input)
  std::vector<std::pair<Tensor, Tensor>> bands_in;  // adaptive input: per band the table [size_i, d_i], projection [C, d_i]
  if (c.adaptive_input) {
    const std::vector<int64_t> cut = c.input_cutoffs();
    int64_t start = 0;
    for (size_t i = 0; i <= cut.size(); ++i) {
      const std::string p = "decoder.embed_tokens.embeddings." + std::to_string(i) + ".";
      if (i == cut.size() && !has(p + "0.weight")) break;  // the last cutoff was V
      Tensor table = take(p + "0.weight"), proj = take(p + "1.weight");
      const int64_t d = nn::VocabBands::dim(in_dim, c.adaptive_input_factor, static_cast<int64_t>(i));
      const int64_t size = i < cut.size() ? cut[i] - start : table.dim(0);
      if (table.rank() != 2 || table.dim(0) != size || table.dim(1) != d)
        fail_input(path, p + "0.weight is " + table.shape().str() + ", expected [" + std::to_string(size) + ", " +
                             std::to_string(d) + "] (adaptive_input_cutoff " + c.adaptive_input_cutoff +
                             ", factor " + std::to_string(c.adaptive_input_factor) + ")", kHint);
      if (proj.shape() != Shape{C, d})
        fail_input(path, p + "1.weight is " + proj.shape().str() + ", expected [" + std::to_string(C) + ", " +
                             std::to_string(d) + "]", kHint);
      start += size;
      t.emplace_back(p + "0.weight", table);
      t.emplace_back(p + "1.weight", proj);
      bands_in.emplace_back(table, proj);
    }
    c.vocab_size = start;
    sd.used.insert("decoder.embed_tokens._float_tensor");
  } else {
    emb = take("decoder.embed_tokens.weight");  // [V, input]
    if (emb.rank() != 2 || emb.dim(1) != in_dim)
      fail_input(path, "decoder.embed_tokens.weight is " + emb.shape().str() + ", expected [V, " + std::to_string(in_dim) +
                           "] (decoder_input_dim)", kHint);
    c.vocab_size = emb.dim(0);
    t.emplace_back("decoder.embed_tokens.weight", emb);
  }
  auto projection = [&](const std::string& name, int64_t rows, int64_t cols) {  // project_in_dim / project_out_dim
    Tensor w = take(name);
    if (w.shape() != Shape{rows, cols})
      fail_input(path, name + " is " + w.shape().str() + ", expected [" + std::to_string(rows) + ", " +
                           std::to_string(cols) + "]", kHint);
    t.emplace_back(name, w);
  };
  try {  // the dims against each other (a tied table needs input = output; tied adaptive weights need both = C),
         // the cutoffs against V, the tied bands against each other
    c.validate();
  } catch (const Error& e) {
    fail_input(path, std::string("its config does not describe a model fairseq can build: ") + e.what(), kHint);
  }
  if (c.has_project_in()) projection("decoder.project_in_dim.weight", C, in_dim);  // [C, input]
  sd.used.insert("decoder.version");
  if (c.pos == PosMethod::Learned) {
    Tensor pos = take("decoder.embed_positions.weight");  // [P + pad + 1, C]
    c.max_target_positions = pos.dim(0) - c.padding_idx - 1;
    t.emplace_back("decoder.embed_positions.weight", pos);
  } else {
    c.max_target_positions = static_cast<int64_t>(num(m, "max_target_positions", static_cast<double>(c.tokens_per_sample)));
    sd.used.insert("decoder.embed_positions._float_tensor");  // sinusoidal: a dtype buffer, no weights
    if (has("decoder.embed_positions.weight"))
      fail_input(path, "has decoder.embed_positions.weight but the config says no learned positions", kHint);
  }
  if (c.layernorm_embedding)
    for (const char* n : {"decoder.layernorm_embedding.weight", "decoder.layernorm_embedding.bias"}) {
      Tensor w = take(n);  // [C]
      if (w.shape() != Shape{C})
        fail_input(path, std::string(n) + " is " + w.shape().str() + ", expected [" + std::to_string(C) + "]", kHint);
      t.emplace_back(n, w);
    }
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    for (const char* n : {"self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                          "self_attn.v_proj.bias", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                          "self_attn.out_proj.weight", "self_attn.out_proj.bias", "self_attn_layer_norm.weight",
                          "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                          "final_layer_norm.weight", "final_layer_norm.bias"})
      t.emplace_back(p + n, take(p + n));
    // NormFormer: each tensor's shape against the config (a wrong one would fail later, less clearly)
    const int64_t F = c.decoder_ffn_embed_dim, H = c.decoder_attention_heads;
    for (const auto& [on, n, size] : {std::tuple{c.scale_heads, "c_attn", H}, std::tuple{c.scale_resids, "w_resid", C},
                                      std::tuple{c.scale_attn, "attn_ln.weight", C},
                                      std::tuple{c.scale_attn, "attn_ln.bias", C},
                                      std::tuple{c.scale_fc, "ffn_layernorm.weight", F},
                                      std::tuple{c.scale_fc, "ffn_layernorm.bias", F}}) {
      if (!on) continue;
      Tensor w = take(p + n);
      if (w.shape() != Shape{size})
        fail_input(path, p + n + " is " + w.shape().str() + ", expected [" + std::to_string(size) + "]", kHint);
      t.emplace_back(p + n, w);
    }
  }
  if (c.has_final_norm()) {
    t.emplace_back("decoder.layer_norm.weight", take("decoder.layer_norm.weight"));
    t.emplace_back("decoder.layer_norm.bias", take("decoder.layer_norm.bias"));
  }
  const int64_t D = c.output_dim();  // what the output head reads
  if (c.has_project_out()) projection("decoder.project_out_dim.weight", D, C);  // [output, C]
  // A tied tensor is saved twice (one storage): the copy must equal the original; stretch keeps one.
  auto same_as = [&](const std::string& name, const Tensor& original, const std::string& original_name) {
    Tensor o = take(name);
    if (o.shape() != original.shape() || !std::equal(o.f32(), o.f32() + o.numel(), original.f32()))
      fail_input(path, name + " should be " + original_name + " (tied) but differs from it", kHint);
  };
  if (c.has_adaptive_softmax()) {
    const std::string a = "decoder.adaptive_softmax.";
    const nn::VocabBands b = nn::VocabBands::make(c.softmax_cutoffs(), c.vocab_size);  // V from the input side
    const int64_t k = b.count();
    auto expect = [&](const std::string& name, const Tensor& x, Shape want) {
      if (x.shape() != want) fail_input(path, name + " is " + x.shape().str() + ", expected " + want.str(), kHint);
    };
    if (c.tie_adaptive_weights) {
      Tensor cls = take(a + "head.class_proj.weight");
      expect(a + "head.class_proj.weight", cls, Shape{k - 1, D});
      t.emplace_back(a + "head.class_proj.weight", cls);
      if (has(a + "head.word_proj.weight"))
        same_as(a + "head.word_proj.weight", bands_in[0].first, "decoder.embed_tokens.embeddings.0.0.weight");
      sd.used.insert(a + "head._float_tensor");
    } else {
      Tensor head = take(a + "head.weight");
      expect(a + "head.weight", head, Shape{b.size(0) + k - 1, D});
      t.emplace_back(a + "head.weight", head);
    }
    for (int64_t i = 1; i < k; ++i) {
      const std::string p = a + "tail." + std::to_string(i - 1) + ".";
      const std::string in = "decoder.embed_tokens.embeddings." + std::to_string(i) + ".";
      const auto band = static_cast<size_t>(i);
      if (c.tie_adaptive_weights && c.tie_adaptive_proj) {
        if (has(p + "0.weight")) same_as(p + "0.weight", bands_in[band].second, in + "1.weight");
      } else {
        const int64_t d = c.tie_adaptive_weights ? bands_in[band].first.dim(1)
                                                 : nn::VocabBands::dim(D, c.adaptive_softmax_factor, i);
        Tensor proj = take(p + "0.weight");
        expect(p + "0.weight", proj, Shape{d, D});
        t.emplace_back(p + "0.weight", proj);
      }
      if (c.tie_adaptive_weights) {
        if (has(p + "2.weight")) same_as(p + "2.weight", bands_in[band].first, in + "0.weight");
      } else {
        Tensor o = take(p + "2.weight");
        expect(p + "2.weight", o, Shape{b.size(i), nn::VocabBands::dim(D, c.adaptive_softmax_factor, i)});
        t.emplace_back(p + "2.weight", o);
      }
    }
    sd.used.insert(a + "version");
  } else if (c.share_decoder_input_output_embed) {
    // Saved twice (one storage): the copy must be the embedding, and stretch keeps one tensor.
    if (has("decoder.output_projection.weight")) {
      Tensor o = take("decoder.output_projection.weight");
      if (o.shape() != emb.shape() || !std::equal(o.f32(), o.f32() + o.numel(), emb.f32()))
        fail_input(path, "share_decoder_input_output_embed is set but decoder.output_projection.weight differs from "
                         "decoder.embed_tokens.weight", kHint);
    }
  } else {
    Tensor o = take("decoder.output_projection.weight");  // [V, output]
    if (o.shape() != Shape{c.vocab_size, D})
      fail_input(path, "decoder.output_projection.weight is " + o.shape().str() + ", expected [" +
                           std::to_string(c.vocab_size) + ", " + std::to_string(D) + "]", kHint);
    t.emplace_back("decoder.output_projection.weight", o);
  }
  for (const auto& [name, v] : sd.tensors)
    if (!sd.used.count(name))
      fail_input(path, "state dict entry '" + name + "' has no place in the model its config describes", kHint);
  for (const auto& [name, v] : t)
    if (v.numel() > 0 && !std::all_of(v.f32(), v.f32() + v.numel(), [](float x) { return std::isfinite(x); }))
      fail_input(path, "tensor '" + name + "' holds NaN or infinite values", "the checkpoint is damaged; use another one");

  out.config = c.to_json();
  const int64_t params = [&] {
    int64_t n = 0;
    for (const auto& [name, v] : t) n += v.numel();
    return n;
  }();
  out.notes.insert(out.notes.begin(), "fairseq " + out.fairseq_arch + " (" + file.container + " container), " +
                                          std::to_string(params) + " parameters, pos " + pos_method_name(c.pos) +
                                          (c.decoder_normalize_before ? ", pre-norm" : ", post-norm") +
                                          (c.adaptive_input ? ", adaptive input " + c.adaptive_input_cutoff : "") +
                                          (c.has_adaptive_softmax()
                                               ? ", adaptive softmax " + c.adaptive_softmax_cutoff +
                                                     (c.tie_adaptive_weights ? " (tied weights" : " (untied") +
                                                     (c.tie_adaptive_proj ? ", tied projections)" : ")") +
                                                     ", criterion " + criterion_name(c.criterion)
                                           : c.share_decoder_input_output_embed ? ", tied output"
                                                                                : ", untied output"));
  return out;
}

std::string ema_kept_note(const NamedTensors& tensors) {
  const auto n = std::count_if(tensors.begin(), tensors.end(), [](const auto& t) { return t.first.rfind("ema.", 0) == 0; });
  if (n == 0) return "";
  return "extra_state['ema'] (fairseq-train --store-ema's moving average, " + std::to_string(n) +
         " tensors) kept as ema.*: eval-lm --model-overrides \"{'use_ema': True}\" evaluates it, train --store-ema "
         "continues it";
}

FairseqImport import_fairseq(const std::string& path, const FairseqImportOptions& options) {
  TorchFile file = load_torch_file(path);
  const Value& root = *file.root;
  if (root.kind != Kind::Dict)
    fail_input(path, std::string("holds a ") + pickle::kind_name(root.kind) + ", not a fairseq checkpoint dict", kHint);
  const Value* model_sd = root.get("model");
  if (!model_sd || model_sd->kind != Kind::Dict)
    fail_input(path, "has no 'model' state dict (not a fairseq checkpoint)", kHint);
  FairseqImport out = import_state_dict(path, file, model_sd, options);
  // fairseq-train --store-ema's average (trainer.py: extra_state["ema"], the model's state dict): imported
  // as the same model, its tensors kept as ema.<parameter> (train/ema.h's names), or left out with a note.
  const Value* extra = root.get("extra_state");
  const Value* ema = extra && extra->kind == Kind::Dict ? extra->get("ema") : nullptr;
  if (!ema || ema->kind != Kind::Dict) return out;
  try {
    FairseqImport average = import_state_dict(path, file, ema, options);
    if (average.config != out.config) fail_input(path, "its config differs from the model's", kHint);
    for (auto& [name, t] : average.tensors) out.tensors.emplace_back("ema." + name, std::move(t));
  } catch (const Error& e) {
    std::string why = e.message();
    if (why.rfind(path + ": ", 0) == 0) why = why.substr(path.size() + 2);
    const bool final_ln = why.find("decoder.layer_norm.") != std::string::npos;
    out.notes.push_back("extra_state['ema'] (fairseq-train --store-ema's moving average) is not imported: " + why +
                        (final_ln ? " (fairseq 0.12.2's EMA drops a pre-norm model's final LayerNorm: docs/fairseq.md)"
                                  : ""));
  }
  return out;
}

}  // namespace stretch::models
