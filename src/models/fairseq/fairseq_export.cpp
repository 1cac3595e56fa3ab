// models/fairseq/fairseq_export.cpp — see fairseq_export.h.
#include "models/fairseq/fairseq_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.h"
#include "models/adaptive_span/config.h"
#include "models/registry.h"
#include "models/transformer_lm/config.h"
#include "models/transformer_xl/config.h"
#include "tensor/pickle_writer.h"
#include "tensor/torch_file.h"

namespace stretch::models {

namespace {

// Refuses what fairseq's examples/adaptive_span cannot build (the original's switches).
AdaptiveSpanConfig exportable_span_config(const nlohmann::json& j) {
  const AdaptiveSpanConfig c = AdaptiveSpanConfig::from_json(j);
  if (c.adapt_span_renormalise)
    fail_usage("export-fairseq: the model renormalises the masked attention (--adapt-span-renormalise, the original), "
               "which fairseq's examples/adaptive_span does not",
               "export models trained with fairseq's semantics (no --adapt-span-renormalise)");
  if (c.adapt_span_clamp != SpanClamp::Forward)
    fail_usage("export-fairseq: the model clamps z after each step (--adapt-span-clamp after_step, the original); "
               "fairseq's port clamps in the forward",
               "export models trained with --adapt-span-clamp forward (the default)");
  return c;
}

// Refuses what fairseq's transformer_xl (HF TransfoXL with untie_r, zero first memory) cannot build.
TransformerXLConfig exportable_xl_config(const nlohmann::json& j) {
  const TransformerXLConfig c = TransformerXLConfig::from_json(j);
  if (c.xl_original)
    fail_usage("export-fairseq: the model has --xl-original (empty first memory, one shared r bias pair), which "
               "fairseq's transformer_xl (HF TransfoXL) does not build",
               "export models trained with HF's semantics (no --xl-original)");
  if (!c.untie_r)
    fail_usage("export-fairseq: the model shares one r bias pair (untie_r false); fairseq's transformer_xl builds "
               "HF's default, one pair per layer",
               "export models with untie_r true (the default)");
  return c;
}

std::vector<int64_t> cutoff_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

void export_fairseq(const LanguageModel& model, const std::string& path, const NamedTensors* ema) {
  const nlohmann::json j = model.config_json();
  const Family& family = family_of_config(j, path);
  if (family.name != "transformer_lm" && family.name != "adaptive_span" && family.name != "transformer_xl")
    fail_usage("export-fairseq: the model is of the " + family.name + " family; transformer_lm, adaptive_span and "
               "transformer_xl export today");
  const bool span = family.name == "adaptive_span", xl = family.name == "transformer_xl";
  const AdaptiveSpanConfig sc = span ? exportable_span_config(j) : AdaptiveSpanConfig{};
  const TransformerXLConfig xc = xl ? exportable_xl_config(j) : TransformerXLConfig{};
  const bool lm = !span && !xl;
  const TransformerLMConfig c = lm ? TransformerLMConfig::from_json(j) : TransformerLMConfig{};
  if (lm && c.pos != PosMethod::Sinusoidal && c.pos != PosMethod::Learned && c.pos != PosMethod::None)
    fail_usage(std::string("export-fairseq: the model has --pos ") + pos_method_name(c.pos) +
                   ", which fairseq 0.12.2's transformer_lm has no module for",
               "export models with --pos sinusoidal, learned or none");

  pickle::Writer w;
  std::vector<TorchZipEntry> entries;
  auto add_storage = [&](const Tensor& t) {
    const std::string key = std::to_string(entries.size());
    TorchZipEntry e{"data/" + key, std::vector<uint8_t>(t.nbytes())};
    std::memcpy(e.bytes.data(), t.bytes(), t.nbytes());
    entries.push_back(std::move(e));
    return key;
  };
  auto tensor = [&](const std::string& key, const Tensor& t) {
    std::vector<int64_t> shape;
    for (int d = 0; d < t.rank(); ++d) shape.push_back(t.dim(d));
    w.tensor(t.dtype() == DType::I64 ? "LongStorage" : "FloatStorage", key, t.numel(), shape);
  };

  w.empty_dict();
  w.mark();
  // args: what fairseq's transformer_lm reads; the rest comes from fairseq's defaults.
  w.str("args");
  w.namespace_begin();
  w.mark();
  auto kv_s = [&](const char* k, const std::string& v) { w.str(k); w.str(v); };
  auto kv_i = [&](const char* k, int64_t v) { w.str(k); w.integer(v); };
  auto kv_b = [&](const char* k, bool v) { w.str(k); w.boolean(v); };
  auto kv_f = [&](const char* k, double v) { w.str(k); w.real(v); };
  if (span) {
    // examples/adaptive_span's AdaptiveSpanSmallConfig and the truncated_bptt_lm task; fairseq-eval-lm
    // needs --user-dir examples/adaptive_span to know the arch.
    kv_s("arch", "adaptive_span");
    kv_s("task", "truncated_bptt_lm");
    kv_s("criterion", "adaptive_span_loss");
    kv_s("data", ".");
    kv_i("vocab_size", sc.vocab_size);
    kv_i("d_model", sc.d_model);
    kv_i("n_head", sc.n_head);
    kv_i("d_inner", sc.d_inner);
    kv_i("n_layer", sc.n_layer);
    kv_i("attn_span", sc.attn_span);
    kv_f("dropout", sc.dropout);
    kv_f("emb_dropout", sc.emb_dropout);
    kv_i("adapt_span_ramp", sc.adapt_span_ramp);
    kv_f("adapt_span_init", sc.adapt_span_init);
    kv_f("aux_loss_scaler", sc.aux_loss_scaler);
    kv_b("adapt_span_layer", sc.adapt_span_layer);
    kv_i("tokens_per_sample", sc.tokens_per_sample);
    kv_i("max_target_positions", sc.tokens_per_sample);
    w.namespace_end();
  } else if (xl) {
    // examples/truncated_bptt's TransformerXLConfig; fairseq-eval-lm needs --user-dir examples/truncated_bptt.
    kv_s("arch", "transformer_xl");
    kv_s("task", "truncated_bptt_lm");
    kv_s("criterion", "cross_entropy");
    kv_s("data", ".");
    w.str("cutoffs");
    w.empty_list();
    w.mark();
    for (int64_t v : cutoff_list(xc.cutoffs)) w.integer(v);
    w.appends_from_mark();
    kv_i("d_model", xc.d_model);
    kv_i("n_head", xc.n_head);
    kv_i("d_head", xc.d_head);
    kv_i("d_inner", xc.d_inner);
    kv_i("div_val", xc.div_val);
    kv_i("n_layer", xc.n_layer);
    kv_i("mem_len", xc.mem_len);
    kv_i("clamp_len", xc.clamp_len);
    kv_b("same_length", xc.same_length);
    kv_f("dropout", xc.dropout);
    kv_f("dropatt", xc.dropatt);
    kv_b("checkpoint_activations", false);
    kv_b("offload_activations", false);
    kv_i("tokens_per_sample", xc.tokens_per_sample);
    kv_i("max_target_positions", xc.max_target_positions);
    w.namespace_end();
  } else {
    kv_s("arch", "transformer_lm");
    kv_s("task", "language_modeling");
    kv_s("criterion", criterion_name(c.criterion));
    kv_s("data", ".");
    kv_i("decoder_layers", c.decoder_layers);
    kv_i("decoder_embed_dim", c.decoder_embed_dim);
    kv_i("decoder_input_dim", c.input_dim());
    kv_i("decoder_output_dim", c.output_dim());
    kv_i("decoder_ffn_embed_dim", c.decoder_ffn_embed_dim);
    kv_i("decoder_attention_heads", c.decoder_attention_heads);
    kv_b("decoder_normalize_before", c.decoder_normalize_before);
    kv_b("no_decoder_final_norm", c.no_decoder_final_norm);
    kv_b("share_decoder_input_output_embed", c.share_decoder_input_output_embed);
    kv_b("no_scale_embedding", c.no_scale_embedding);
    kv_b("layernorm_embedding", c.layernorm_embedding);
    kv_b("scale_heads", c.scale_heads);  // NormFormer
    kv_b("scale_attn", c.scale_attn);
    kv_b("scale_fc", c.scale_fc);
    kv_b("scale_resids", c.scale_resids);
    kv_b("add_bos_token", c.add_bos_token);  // the task flag (fairseq-eval-lm still needs --add-bos-token)
    kv_b("decoder_learned_pos", c.pos == PosMethod::Learned);
    kv_b("no_token_positional_embeddings", c.pos == PosMethod::None);
    kv_s("activation_fn", ops::activation_name(c.activation_fn));
    kv_i("tokens_per_sample", c.tokens_per_sample);
    kv_i("max_target_positions", c.max_target_positions);
    kv_f("dropout", c.dropout);
    kv_f("attention_dropout", c.attention_dropout);
    kv_f("activation_dropout", c.activation_dropout);
    kv_f("decoder_layerdrop", c.decoder_layerdrop);
    if (c.adaptive_input) {
      kv_b("adaptive_input", true);
      kv_f("adaptive_input_factor", c.adaptive_input_factor);
      kv_s("adaptive_input_cutoff", c.adaptive_input_cutoff);
    }
    if (c.has_adaptive_softmax()) {
      kv_s("adaptive_softmax_cutoff", c.adaptive_softmax_cutoff);
      kv_f("adaptive_softmax_dropout", c.adaptive_softmax_dropout);
      kv_f("adaptive_softmax_factor", c.adaptive_softmax_factor);
      kv_b("tie_adaptive_weights", c.tie_adaptive_weights);
      kv_b("tie_adaptive_proj", c.tie_adaptive_weights && c.tie_adaptive_proj);
      if (c.criterion == Criterion::AdaptiveLoss) kv_s("ddp_backend", "legacy_ddp");  // fairseq's adaptive_loss needs it
    }
    w.namespace_end();
  }

  // The state dict (fairseq's names, buffers, tied tensors again over the same storage), with the
  // parameters' values or, for extra_state["ema"], their moving averages (train/ema.h).
  auto state_dict = [&](const NamedTensors* averages) {
    w.empty_dict();
    w.mark();
    if (lm) {
      Tensor version = Tensor::full(Shape{1}, 3.0f);  // TransformerDecoder's "version" buffer
      w.str("decoder.version");
      tensor(add_storage(version), version);
    }
    std::map<std::string, std::pair<std::string, const Tensor*>> stored;  // name → (storage key, tensor)
    for (const auto& [name, var] : model.params().items()) {
      const Tensor* value = &var.value();
      if (averages) {
        const std::string& wanted = name;  // a structured binding cannot be captured before C++20 (clang)
        auto it = std::find_if(averages->begin(), averages->end(), [&](const auto& a) { return a.first == wanted; });
        if (it == averages->end() || it->second.numel() != value->numel())
          fail_input(path, "the model's EMA has no " + std::string(it == averages->end() ? "tensor" : "tensor of its size") +
                               " for '" + name + "'", "export a checkpoint written whole by `stretch train --store-ema`");
        value = &it->second;
      }
      const std::string key = add_storage(*value);
      stored[name] = {key, value};
      w.str(name);
      tensor(key, *value);
    }
    // Tied tensors are saved again under fairseq's second name, over the same storage (as torch does).
    auto again = [&](const std::string& name, const std::string& original) {
      auto it = stored.find(original);
      if (it == stored.end()) fail_internal(__FILE__, __LINE__, "transformer_lm without " + original);
      w.str(name);
      tensor(it->second.first, *it->second.second);
    };
    auto buffer = [&](const std::string& name, const Tensor& t) {
      w.str(name);
      tensor(add_storage(t), t);
    };
    if (span) {  // AdaptiveMask's buffer per layer: torch.linspace(1 - L, 0, steps=L)
      const int64_t L = sc.attn_span;
      Tensor tmpl = Tensor::empty(Shape{L});
      for (int64_t i = 0; i < L; ++i)
        tmpl.f32()[i] = L == 1 ? 0.f : static_cast<float>((1.0 - static_cast<double>(L)) * (1.0 - static_cast<double>(i) / static_cast<double>(L - 1)));
      for (int64_t l = 0; l < sc.n_layer; ++l)
        buffer("decoder.model.layers." + std::to_string(l) + ".attn.attn.adaptive_span._mask.mask_template", tmpl);
    }
    if (xl) {  // HF saves each tied tensor again under the output's name, and pos_emb's inv_freq buffer
      const std::string top = "decoder.model.transformer.", crit = "decoder.model.crit.";
      const int64_t bands = static_cast<int64_t>(xc.kept_cutoffs().size()) + 1;
      for (int64_t i = 0; i < (xc.div_val == 1 ? 1 : bands); ++i) {
        const std::string n = std::to_string(i);
        again(crit + "out_layers." + n + ".weight", top + "word_emb.emb_layers." + n + ".weight");
        if (xc.div_val > 1 && i > 0) again(crit + "out_projs." + n, top + "word_emb.emb_projs." + n);
      }
      Tensor inv = Tensor::empty(Shape{xc.d_model / 2});  // 1 / 10000^(2k/C)
      for (int64_t k = 0; k < inv.numel(); ++k)
        inv.f32()[k] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * static_cast<double>(k) / static_cast<double>(xc.d_model)));
      buffer(top + "pos_emb.inv_freq", inv);
    }
    if (lm && c.adaptive_input) buffer("decoder.embed_tokens._float_tensor", Tensor::zeros(Shape{1}));
    if (lm && c.has_adaptive_softmax()) {
      const std::string a = "decoder.adaptive_softmax.", in = "decoder.embed_tokens.embeddings.";
      const int64_t tails = static_cast<int64_t>(c.softmax_cutoffs().size()) -
                            (c.softmax_cutoffs().back() == c.vocab_size ? 1 : 0);  // bands − 1
      if (c.tie_adaptive_weights) {
        again(a + "head.word_proj.weight", in + "0.0.weight");
        buffer(a + "head._float_tensor", Tensor::zeros(Shape{1}));
        for (int64_t i = 1; i <= tails; ++i) {
          const std::string tail = a + "tail." + std::to_string(i - 1) + ".";
          if (c.tie_adaptive_proj) again(tail + "0.weight", in + std::to_string(i) + ".1.weight");
          again(tail + "2.weight", in + std::to_string(i) + ".0.weight");
        }
      }
      Tensor version = Tensor::empty(Shape{1}, DType::I64);  // AdaptiveSoftmax's "version" buffer: 1
      version.i64()[0] = 1;
      buffer(a + "version", version);
    } else if (lm && c.share_decoder_input_output_embed) {
      again("decoder.output_projection.weight", "decoder.embed_tokens.weight");
    }
    if (lm && c.pos == PosMethod::Sinusoidal) {
      Tensor buf = Tensor::zeros(Shape{1});
      w.str("decoder.embed_positions._float_tensor");
      tensor(add_storage(buf), buf);
    }
    w.setitems_from_mark();
  };
  w.str("model");
  state_dict(nullptr);

  w.str("optimizer_history");
  w.empty_list();
  w.mark();
  w.empty_dict();
  w.mark();
  kv_s("criterion_name", span ? "AdaptiveSpanCriterion" : "CrossEntropyCriterion");  // XL: cross_entropy too
  kv_s("optimizer_name", "none (exported by stretch)");
  w.str("lr_scheduler_state");
  w.empty_dict();
  w.mark();
  w.str("best");
  w.none();
  w.setitems_from_mark();
  kv_i("num_updates", 0);
  w.setitems_from_mark();
  w.appends_from_mark();
  w.str("extra_state");
  w.empty_dict();
  if (ema) {  // what fairseq-train --store-ema saves; checkpoint_utils.load_ema_from_checkpoint reads it
    w.mark();
    w.str("ema");
    state_dict(ema);
    w.setitems_from_mark();
  }
  w.setitems_from_mark();

  std::vector<TorchZipEntry> all;
  all.push_back({"data.pkl", w.finish()});
  all.push_back({"version", {'3', '\n'}});
  for (auto& e : entries) all.push_back(std::move(e));
  std::string stem = std::filesystem::path(path).stem().string();
  if (stem.empty()) stem = "archive";
  save_torch_zip(path, stem, all);
}

}  // namespace stretch::models
