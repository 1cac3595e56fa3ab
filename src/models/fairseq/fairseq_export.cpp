// models/fairseq/fairseq_export.cpp — see fairseq_export.h.
#include "models/fairseq/fairseq_export.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "models/registry.h"
#include "models/transformer_lm/config.h"
#include "tensor/pickle_writer.h"
#include "tensor/torch_file.h"

namespace stretch::models {

void export_fairseq(const LanguageModel& model, const std::string& path) {
  const nlohmann::json j = model.config_json();
  const Family& family = family_of_config(j, path);
  if (family.name != "transformer_lm")
    fail_usage("export-fairseq: the model is of the " + family.name + " family; only transformer_lm exports today");
  const TransformerLMConfig c = TransformerLMConfig::from_json(j);
  if (c.pos != PosMethod::Sinusoidal && c.pos != PosMethod::Learned && c.pos != PosMethod::None)
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
    w.tensor("FloatStorage", key, t.numel(), shape);
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
  kv_s("arch", "transformer_lm");
  kv_s("task", "language_modeling");
  kv_s("criterion", "cross_entropy");
  kv_s("data", ".");
  kv_i("decoder_layers", c.decoder_layers);
  kv_i("decoder_embed_dim", c.decoder_embed_dim);
  kv_i("decoder_input_dim", c.decoder_embed_dim);
  kv_i("decoder_output_dim", c.decoder_embed_dim);
  kv_i("decoder_ffn_embed_dim", c.decoder_ffn_embed_dim);
  kv_i("decoder_attention_heads", c.decoder_attention_heads);
  kv_b("decoder_normalize_before", c.decoder_normalize_before);
  kv_b("no_decoder_final_norm", c.no_decoder_final_norm);
  kv_b("share_decoder_input_output_embed", c.share_decoder_input_output_embed);
  kv_b("no_scale_embedding", c.no_scale_embedding);
  kv_b("decoder_learned_pos", c.pos == PosMethod::Learned);
  kv_b("no_token_positional_embeddings", c.pos == PosMethod::None);
  kv_s("activation_fn", c.activation_fn == ops::Activation::Gelu ? "gelu" : "relu");
  kv_i("tokens_per_sample", c.tokens_per_sample);
  kv_i("max_target_positions", c.max_target_positions);
  kv_f("dropout", c.dropout);
  kv_f("attention_dropout", c.attention_dropout);
  kv_f("activation_dropout", c.activation_dropout);
  w.namespace_end();

  w.str("model");
  w.empty_dict();
  w.mark();
  Tensor version = Tensor::full(Shape{1}, 3.0f);  // TransformerDecoder's "version" buffer
  w.str("decoder.version");
  tensor(add_storage(version), version);
  std::string embed_key;
  const Tensor* embed = nullptr;
  for (const auto& [name, var] : model.params().items()) {
    const std::string key = add_storage(var.value());
    if (name == "decoder.embed_tokens.weight") {
      embed_key = key;
      embed = &var.value();
    }
    w.str(name);
    tensor(key, var.value());
  }
  if (!embed) fail_internal(__FILE__, __LINE__, "transformer_lm without decoder.embed_tokens.weight");
  if (c.share_decoder_input_output_embed) {  // saved twice over one storage, as torch does
    w.str("decoder.output_projection.weight");
    tensor(embed_key, *embed);
  }
  if (c.pos == PosMethod::Sinusoidal) {
    Tensor buf = Tensor::zeros(Shape{1});
    w.str("decoder.embed_positions._float_tensor");
    tensor(add_storage(buf), buf);
  }
  w.setitems_from_mark();

  w.str("optimizer_history");
  w.empty_list();
  w.mark();
  w.empty_dict();
  w.mark();
  kv_s("criterion_name", "CrossEntropyCriterion");
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
