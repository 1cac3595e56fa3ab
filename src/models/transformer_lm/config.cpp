// models/transformer_lm/config.cpp — the transformer_lm field table, presets and checks.
#include "models/transformer_lm/config.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "models/activation_field.h"
#include "models/apply_model_config.h"
#include "models/transformer_lm/alibi_variants.h"

namespace stretch::models {

const char* pos_method_name(PosMethod p) {
  switch (p) {
    case PosMethod::Alibi: return "alibi";
    case PosMethod::Sinusoidal: return "sinusoidal";
    case PosMethod::Learned: return "learned";
    case PosMethod::Rope: return "rope";
    case PosMethod::T5: return "t5";
    case PosMethod::None: return "none";
  }
  return "?";
}

PosMethod parse_pos_method(const std::string& s) {
  for (PosMethod p : {PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope, PosMethod::T5,
                      PosMethod::None})
    if (s == pos_method_name(p)) return p;
  fail_usage("--pos: unknown position method '" + s + "'", "use one of alibi, sinusoidal, learned, rope, t5, none");
}

const char* criterion_name(Criterion c) { return c == Criterion::AdaptiveLoss ? "adaptive_loss" : "cross_entropy"; }

Criterion parse_criterion(const std::string& s) {
  if (s == "cross_entropy") return Criterion::CrossEntropy;
  if (s == "adaptive_loss") return Criterion::AdaptiveLoss;
  fail_usage("--criterion: unknown criterion '" + s + "'", "use cross_entropy or adaptive_loss");
}

const char* upper_pos_name(UpperPos p) {
  switch (p) {
    case UpperPos::Same: return "same";
    case UpperPos::Rope: return "rope";
    case UpperPos::T5: return "t5";
    case UpperPos::None: return "none";
  }
  return "?";
}

UpperPos parse_upper_pos(const std::string& s) {
  for (UpperPos p : {UpperPos::Same, UpperPos::Rope, UpperPos::T5, UpperPos::None})
    if (s == upper_pos_name(p)) return p;
  fail_usage("--pos-upper: unknown position method '" + s + "' for the upper layers", "use one of same, rope, t5, none");
}

const char* alibi_shape_name(ops::AlibiShape s) {
  switch (s) {
    case ops::AlibiShape::Linear: return "linear";
    case ops::AlibiShape::Log: return "log";
    case ops::AlibiShape::Clipped: return "clipped";
  }
  return "?";
}

ops::AlibiShape parse_alibi_shape(const std::string& s) {
  for (ops::AlibiShape a : {ops::AlibiShape::Linear, ops::AlibiShape::Log, ops::AlibiShape::Clipped})
    if (s == alibi_shape_name(a)) return a;
  fail_usage("--alibi-shape: unknown bias shape '" + s + "'", "use one of linear, log, clipped");
}

namespace {
// fairseq's eval_str_list of a cutoff flag: "20000,60000" (also "[20000, 60000]" or "(20000,60000)").
std::vector<int64_t> parse_cutoffs(const std::string& text, const char* flag, const char* key) {
  std::string s;
  for (char ch : text)
    if (ch != ' ' && ch != '[' && ch != ']' && ch != '(' && ch != ')') s += ch;
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t end = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, end - pos);
    if (!(item.empty() && end == s.size() && !out.empty())) {  // a trailing comma is fine
      const std::optional<int64_t> v = parse_integer(item);
      if (!v || *v <= 0)
        fail_usage(std::string(flag) + " '" + text + "' (model config key '" + key + "'): '" + item +
                       "' is not a positive integer",
                   "give increasing word ids separated by commas, e.g. 20000,60000");
      out.push_back(*v);
    }
    pos = end + 1;
  }
  return out;
}

}  // namespace

const std::vector<Field<TransformerLMConfig>>& TransformerLMConfig::fields() {
  using C = TransformerLMConfig;
  using R = FieldRole;
  using namespace fields;
  const auto alibi = std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::Alibi; });
  static const std::vector<Field<C>> table = {
      text(&C::arch, {.key = "arch", .role = R::Free}),
      number(&C::vocab_size, {.key = "vocab_size", .help = "from dict.txt"}),
      number(&C::decoder_layers, {.key = "decoder_layers", .flag = "--decoder-layers", .help = "blocks L"}),
      number(&C::decoder_embed_dim, {.key = "decoder_embed_dim", .flag = "--decoder-embed-dim", .help = "model dim C"}),
      number(&C::decoder_input_dim, {.key = "decoder_input_dim", .flag = "--decoder-input-dim",
                                     .help = "token embedding dim (0: C; else projected to C by project_in_dim)"}),
      number(&C::decoder_output_dim, {.key = "decoder_output_dim", .flag = "--decoder-output-dim",
                                      .help = "output head input dim (0: C; else project_out_dim C -> it)"}),
      number(&C::decoder_ffn_embed_dim,
             {.key = "decoder_ffn_embed_dim", .flag = "--decoder-ffn-embed-dim", .help = "FFN inner dim"}),
      number(&C::decoder_attention_heads,
             {.key = "decoder_attention_heads", .flag = "--decoder-attention-heads", .help = "heads H"}),
      boolean(&C::decoder_normalize_before, {.key = "decoder_normalize_before", .flag = "--decoder-normalize-before",
                                             .help = "pre-norm blocks (the default)"}),
      boolean(&C::no_decoder_final_norm, {.key = "no_decoder_final_norm", .flag = "--no-decoder-final-norm",
                                          .help = "no LayerNorm after the last pre-norm block"}),
      boolean(&C::share_decoder_input_output_embed,
              {.key = "share_decoder_input_output_embed", .flag = "--share-decoder-input-output-embed",
               .help = "tie the output projection to the token embedding"}),
      boolean(&C::no_scale_embedding,
              {.key = "no_scale_embedding", .flag = "--no-scale-embedding", .help = "no sqrt(C) embedding scale"}),
      boolean(&C::layernorm_embedding,
              {.key = "layernorm_embedding", .flag = "--layernorm-embedding",
               .help = "a LayerNorm (decoder.layernorm_embedding) on the scaled embedding plus positions, before dropout"}),
      boolean(&C::scale_heads, {.key = "scale_heads", .flag = "--scale-heads",
                                .help = "NormFormer: a learned scale per head (c_attn [H]) on the attention output"}),
      boolean(&C::scale_attn, {.key = "scale_attn", .flag = "--scale-attn",
                               .help = "NormFormer: a LayerNorm (attn_ln) after the attention"}),
      boolean(&C::scale_fc, {.key = "scale_fc", .flag = "--scale-fc",
                             .help = "NormFormer: a LayerNorm (ffn_layernorm) between the fully connected layers"}),
      boolean(&C::scale_resids, {.key = "scale_resids", .flag = "--scale-resids",
                                 .help = "NormFormer: a learned scale (w_resid [C]) on the FFN's residual"}),
      activation_field(&C::activation_fn),
      choice(&C::pos, pos_method_name, parse_pos_method,
             {PosMethod::Alibi, PosMethod::Sinusoidal, PosMethod::Learned, PosMethod::Rope, PosMethod::T5,
              PosMethod::None},
             {.key = "pos", .flag = "--pos", .help = "position method: alibi (default) | sinusoidal | learned | rope | t5 | none"}),
      number(&C::tokens_per_sample, {.key = "tokens_per_sample", .role = R::Free}),
      when(number(&C::max_target_positions, {.key = "max_target_positions", .flag = "--max-target-positions",
                                             .help = "learned-position table size (default: --tokens-per-sample)"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos == PosMethod::Learned; })),
      number(&C::dropout, {.key = "dropout", .flag = "--dropout", .role = R::Free}),
      number(&C::attention_dropout, {.key = "attention_dropout", .flag = "--attention-dropout", .role = R::Free}),
      number(&C::activation_dropout,
             {.key = "activation_dropout", .flag = "--activation-dropout,--relu-dropout", .role = R::Free}),
      number(&C::decoder_layerdrop,
             {.key = "decoder_layerdrop", .flag = "--decoder-layerdrop",
              .help = "LayerDrop: in training each block is skipped with this probability (every block runs in evaluation)",
              .role = R::Free}),
      number(&C::padding_idx, {.key = "padding_idx", .help = "from dict.txt"}),
      when(number(&C::t5_num_buckets, {.key = "t5_num_buckets", .flag = "--t5-num-buckets"}),
           std::function<bool(const C&)>([](const C& c) { return c.t5_anywhere(); })),
      when(number(&C::t5_max_distance, {.key = "t5_max_distance", .flag = "--t5-max-distance"}),
           std::function<bool(const C&)>([](const C& c) { return c.t5_anywhere(); })),
      when(number(&C::rope_base, {.key = "rope_base", .flag = "--rope-base"}),
           std::function<bool(const C&)>([](const C& c) { return c.rope_anywhere(); })),
      // ALiBi variants (issue 15): one contiguous block; contract in alibi_variants.h.
      when(text(&C::alibi_slopes, {.key = "alibi_slopes", .flag = "--alibi-slopes",
                                   .help = "ALiBi: H comma-separated slopes instead of the paper's rule"}),
           alibi),
      when(text(&C::alibi_slope_groups,
                {.key = "alibi_slope_groups", .flag = "--alibi-slope-groups",
                 .help = "ALiBi: heads in groups n:scale,... each with its own geometric series times scale"}),
           alibi),
      when(text(&C::alibi_layer_scale, {.key = "alibi_layer_scale", .flag = "--alibi-layer-scale",
                                        .help = "ALiBi: per-layer slope factors r0,r1,... (L values) or linear:F"}),
           alibi),
      when(text(&C::alibi_no_bias_heads, {.key = "alibi_no_bias_heads", .flag = "--alibi-no-bias-heads",
                                          .help = "ALiBi: heads without bias, layer:head,..."}),
           alibi),
      when(boolean(&C::alibi_learnable_slopes,
                   {.key = "alibi_learnable_slopes", .flag = "--alibi-learnable-slopes",
                    .help = "ALiBi: slopes are parameters (per layer, initialised from the rule)"}),
           alibi),
      when(boolean(&C::alibi_positive_slopes, {.key = "alibi_positive_slopes", .flag = "--alibi-positive-slopes",
                                               .help = "ALiBi: clamp learnable slopes to >= 0 after every update"}),
           alibi),
      when(choice(&C::alibi_shape, alibi_shape_name, parse_alibi_shape,
                  {ops::AlibiShape::Linear, ops::AlibiShape::Log, ops::AlibiShape::Clipped},
                  {.key = "alibi_shape", .flag = "--alibi-shape",
                   .help = "ALiBi bias shape: linear m*d (default) | log m*ln(1+d) | clipped m*min(d, D)"}),
           alibi),
      when(number(&C::alibi_clip_distance, {.key = "alibi_clip_distance", .flag = "--alibi-clip-distance",
                                            .help = "ALiBi clipped shape: the distance D after which the bias is constant"}),
           alibi),
      when(number(&C::alibi_slope_warmup_updates,
                  {.key = "alibi_slope_warmup_updates", .flag = "--alibi-slope-warmup-updates",
                   .help = "ALiBi: slopes grow linearly from --alibi-slope-warmup-init of their value over N updates"}),
           alibi),
      when(number(&C::alibi_slope_warmup_init, {.key = "alibi_slope_warmup_init", .flag = "--alibi-slope-warmup-init",
                                                .help = "ALiBi slope warm-up: the fraction F in (0, 1] at update 0"}),
           alibi),
      choice(&C::pos_upper, upper_pos_name, parse_upper_pos, {UpperPos::Same, UpperPos::Rope, UpperPos::T5, UpperPos::None},
             {.key = "pos_upper", .flag = "--pos-upper",
              .help = "hybrid stack: position method of the upper layers (same | rope | t5 | none), with --pos alibi"}),
      when(number(&C::pos_upper_from_layer, {.key = "pos_upper_from_layer", .flag = "--pos-upper-from-layer",
                                             .help = "hybrid stack: the first layer K that uses --pos-upper"}),
           std::function<bool(const C&)>([](const C& c) { return c.pos_upper != UpperPos::Same; })),
      boolean(&C::adaptive_input, {.key = "adaptive_input", .flag = "--adaptive-input",
                                   .help = "adaptive input embeddings (bands by --adaptive-input-cutoff)"}),
      number(&C::adaptive_input_factor, {.key = "adaptive_input_factor", .flag = "--adaptive-input-factor",
                                         .help = "band i has dimension C / factor^i (default 4)"}),
      text(&C::adaptive_input_cutoff, {.key = "adaptive_input_cutoff", .flag = "--adaptive-input-cutoff",
                                       .help = "comma-separated band ends, e.g. 20000,60000"}),
      text(&C::adaptive_softmax_cutoff, {.key = "adaptive_softmax_cutoff", .flag = "--adaptive-softmax-cutoff",
                                         .help = "adaptive softmax band ends, e.g. 20000,60000 (with --criterion adaptive_loss)"}),
      number(&C::adaptive_softmax_dropout, {.key = "adaptive_softmax_dropout", .flag = "--adaptive-softmax-dropout",
                                            .help = "dropout on the adaptive softmax input and inside each tail",
                                            .role = R::Free}),
      number(&C::adaptive_softmax_factor, {.key = "adaptive_softmax_factor", .flag = "--adaptive-softmax-factor",
                                           .help = "tail i has dimension C / factor^i (default 4)"}),
      boolean(&C::tie_adaptive_weights, {.key = "tie_adaptive_weights", .flag = "--tie-adaptive-weights",
                                         .help = "share the adaptive input's tables with the adaptive softmax"}),
      boolean(&C::tie_adaptive_proj, {.key = "tie_adaptive_proj", .flag = "--tie-adaptive-proj",
                                      .help = "share the band projections too (used transposed in the softmax)"}),
      choice(&C::criterion, criterion_name, parse_criterion, {Criterion::CrossEntropy, Criterion::AdaptiveLoss},
             {.key = "criterion", .flag = "--criterion",
              .help = "cross_entropy (default) | adaptive_loss (needs --adaptive-softmax-cutoff)", .role = R::Free}),
      number(&C::alibi_slope_scale, {.key = "alibi_slope_scale", .role = R::Evaluation}),
      number(&C::attention_window, {.key = "attention_window", .role = R::Evaluation}),
      number(&C::mem_len, {.key = "mem_len", .flag = "--mem-len",
                           .help = "XL-style memory: every layer also attends to its detached inputs of the last N "
                                   "tokens of earlier batches (--task truncated_bptt_lm; alibi, t5, none)",
                           .role = R::Free}),
      boolean(&C::add_bos_token,
              {.key = "add_bos_token", .flag = "--add-bos-token",
               .help = "fairseq's --add-bos-token: <s> starts every training row (input and a scored target); "
                       "eval-lm adds it before each block and drops its score",
               .role = R::Free}),
  };
  return table;
}

void TransformerLMConfig::validate() const {
  // Every message names the flag, the config key (--model-overrides, --config, a checkpoint's
  // stored config), the value and what is allowed. Sizes are checked before anything divides by them.
  auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  auto text_of = [&](double v) { return text(v); };
  auto bad = [](const char* flag, const char* key, const std::string& value, const std::string& allowed) {
    if (flag == nullptr) fail_usage(std::string("model config key '") + key + "' is " + value + ": " + allowed);
    fail_usage(std::string(flag) + " " + value + " (model config key '" + key + "'): " + allowed);
  };
  auto at_least = [&](int64_t v, int64_t min, const char* flag, const char* key, const std::string& what) {
    if (v < min) bad(flag, key, std::to_string(v), "must be an integer >= " + std::to_string(min) + " (" + what + ")");
  };
  if (vocab_size <= 0) fail_usage("model: vocab_size must be positive (is the dictionary empty?)");
  at_least(decoder_layers, 1, "--decoder-layers", "decoder_layers", "the number of decoder blocks");
  at_least(decoder_embed_dim, 1, "--decoder-embed-dim", "decoder_embed_dim", "the model width C");
  at_least(decoder_ffn_embed_dim, 1, "--decoder-ffn-embed-dim", "decoder_ffn_embed_dim", "the feed-forward width F");
  at_least(decoder_attention_heads, 1, "--decoder-attention-heads", "decoder_attention_heads",
           "the number of heads H; C must be a multiple of it");
  at_least(decoder_input_dim, 0, "--decoder-input-dim", "decoder_input_dim", "0 means decoder_embed_dim");
  at_least(decoder_output_dim, 0, "--decoder-output-dim", "decoder_output_dim", "0 means decoder_embed_dim");
  if (share_decoder_input_output_embed && !adaptive_input && input_dim() != output_dim())
    fail_usage("--share-decoder-input-output-embed: --decoder-input-dim " + std::to_string(input_dim()) +
                   " and --decoder-output-dim " + std::to_string(output_dim()) + " differ (the tied table is [V, input])",
               "give both the same value, or drop --share-decoder-input-output-embed");
  if (tie_adaptive_weights && (input_dim() != decoder_embed_dim || output_dim() != decoder_embed_dim))
    fail_usage("--tie-adaptive-weights needs --decoder-input-dim = --decoder-output-dim = --decoder-embed-dim",
               "fairseq builds no project_out_dim with tied adaptive weights, so the head would not fit");
  if (decoder_embed_dim % decoder_attention_heads != 0)
    fail_usage("--decoder-embed-dim " + std::to_string(decoder_embed_dim) + " is not divisible by --decoder-attention-heads " +
               std::to_string(decoder_attention_heads));
  if (rope_anywhere() && head_dim() % 2 != 0)
    fail_usage(std::string(pos == PosMethod::Rope ? "--pos rope" : "--pos-upper rope") +
               " needs an even head dimension, got " + std::to_string(head_dim()));
  at_least(tokens_per_sample, 1, "--tokens-per-sample", "tokens_per_sample", "the training block length");
  at_least(max_target_positions, 1, "--max-target-positions", "max_target_positions", "the learned-position table size");
  if (t5_anywhere()) {
    at_least(t5_num_buckets, 2, "--t5-num-buckets", "t5_num_buckets", "T5 uses 32");
    at_least(t5_max_distance, t5_num_buckets / 2 + 1, "--t5-max-distance", "t5_max_distance",
             "it must exceed --t5-num-buckets / 2; T5 uses 128");
  }
  if (!(rope_base > 1.f) || !std::isfinite(rope_base))
    bad("--rope-base", "rope_base", text(rope_base), "must be a finite number > 1 (RoPE's theta; 10000 is the default)");
  const std::pair<const char*, const char*> dropout_names[] = {{"--dropout", "dropout"},
                                                               {"--attention-dropout", "attention_dropout"},
                                                               {"--activation-dropout", "activation_dropout"}};
  const float probs[] = {dropout, attention_dropout, activation_dropout};
  for (int i = 0; i < 3; ++i)
    if (!(probs[i] >= 0.f && probs[i] < 1.f))  // NaN fails both comparisons
      bad(dropout_names[i].first, dropout_names[i].second, text(probs[i]), "must be a probability in [0, 1)");
  if (!(decoder_layerdrop >= 0.f && decoder_layerdrop <= 1.f))
    bad("--decoder-layerdrop", "decoder_layerdrop", text(decoder_layerdrop), "must be a probability in [0, 1]");
  if (decoder_layerdrop > 0.f && mem_len > 0)
    bad("--decoder-layerdrop", "decoder_layerdrop", text(decoder_layerdrop),
        "cannot be combined with --mem-len (a skipped block would leave its memory rows stale); use one of them");
  // Adaptive input / softmax (fairseq's asserts in TransformerLanguageModel.build_model, as usage errors).
  auto check_bands = [&](const std::string& text, float factor, int64_t dim, const char* cut_flag, const char* cut_key,
                         const char* factor_flag, const char* factor_key) {
    const std::vector<int64_t> cut = parse_cutoffs(text, cut_flag, cut_key);
    for (size_t i = 0; i < cut.size(); ++i) {
      if (i > 0 && cut[i] <= cut[i - 1])
        bad(cut_flag, cut_key, "'" + text + "'", "cutoffs must be strictly increasing");
      if (cut[i] > vocab_size)
        bad(cut_flag, cut_key, "'" + text + "'",
            "cutoff " + std::to_string(cut[i]) + " exceeds the vocabulary size " + std::to_string(vocab_size) +
                " (dict.txt); use smaller cutoffs for this dictionary");
    }
    if (cut.front() <= padding_idx)
      bad(cut_flag, cut_key, "'" + text + "'", "the first cutoff must exceed the padding index " + std::to_string(padding_idx));
    const size_t bands = cut.size() + (cut.back() < vocab_size ? 1 : 0);
    if (bands > 16) bad(cut_flag, cut_key, "'" + text + "'", "at most 16 bands (15 cutoffs) are supported");
    if (!(factor > 0.f) || !std::isfinite(factor)) bad(factor_flag, factor_key, text_of(factor), "must be a finite number > 0");
    const double last_dim = std::floor(static_cast<double>(dim) / std::pow(factor, static_cast<double>(bands - 1)));
    if (last_dim < 1)
      bad(factor_flag, factor_key, text_of(factor),
          "the last band's dimension " + std::to_string(dim) + " / factor^" + std::to_string(bands - 1) + " is below 1; use a smaller factor or fewer bands");
    return cut;
  };
  if (adaptive_input) {
    if (adaptive_input_cutoff.empty())
      fail_usage("--adaptive-input needs --adaptive-input-cutoff (model config key 'adaptive_input_cutoff')",
                 "e.g. --adaptive-input-cutoff 20000,60000");
    check_bands(adaptive_input_cutoff, adaptive_input_factor, input_dim(), "--adaptive-input-cutoff", "adaptive_input_cutoff",
                "--adaptive-input-factor", "adaptive_input_factor");
    if (share_decoder_input_output_embed && !has_adaptive_softmax())
      fail_usage("--share-decoder-input-output-embed cannot tie an adaptive input to a full softmax",
                 "use --adaptive-softmax-cutoff with --tie-adaptive-weights");
  }
  if (has_adaptive_softmax()) {
    check_bands(adaptive_softmax_cutoff, adaptive_softmax_factor, output_dim(), "--adaptive-softmax-cutoff", "adaptive_softmax_cutoff",
                "--adaptive-softmax-factor", "adaptive_softmax_factor");
    if (!(adaptive_softmax_dropout >= 0.f && adaptive_softmax_dropout < 1.f))
      bad("--adaptive-softmax-dropout", "adaptive_softmax_dropout", text_of(adaptive_softmax_dropout),
          "must be a probability in [0, 1)");
  } else if (criterion == Criterion::AdaptiveLoss) {
    fail_usage("--criterion adaptive_loss needs an adaptive softmax (--adaptive-softmax-cutoff)",
               "give --adaptive-softmax-cutoff 20000,60000 (or --arch transformer_lm_wiki103), or use --criterion cross_entropy");
  }
  if (tie_adaptive_weights) {
    if (!adaptive_input || !has_adaptive_softmax())
      fail_usage("--tie-adaptive-weights needs --adaptive-input and --adaptive-softmax-cutoff",
                 "give both, or drop --tie-adaptive-weights");
    if (parse_cutoffs(adaptive_input_cutoff, "--adaptive-input-cutoff", "adaptive_input_cutoff") !=
        parse_cutoffs(adaptive_softmax_cutoff, "--adaptive-softmax-cutoff", "adaptive_softmax_cutoff"))
      fail_usage("--tie-adaptive-weights: --adaptive-input-cutoff '" + adaptive_input_cutoff +
                     "' and --adaptive-softmax-cutoff '" + adaptive_softmax_cutoff + "' differ",
                 "tied tables need the same bands: give both the same cutoffs");
    if (adaptive_input_factor != adaptive_softmax_factor)
      fail_usage("--tie-adaptive-weights: --adaptive-input-factor " + text_of(adaptive_input_factor) +
                     " and --adaptive-softmax-factor " + text_of(adaptive_softmax_factor) + " differ",
                 "tied tables need the same band dimensions: give both the same factor");
  } else if (tie_adaptive_proj) {
    log_once(LogLevel::Warning, "--tie-adaptive-proj has no effect without --tie-adaptive-weights (as in fairseq)");
  }
  if (!(alibi_slope_scale > 0.f) || !std::isfinite(alibi_slope_scale))
    bad(nullptr, "alibi_slope_scale", text(alibi_slope_scale), "must be a finite number > 0");
  if (attention_window < 0)
    bad(nullptr, "attention_window", std::to_string(attention_window), "must be an integer >= 0 (0: unlimited)");
  if (mem_len < 0) bad("--mem-len", "mem_len", std::to_string(mem_len), "must be an integer >= 0 (0: no memory)");
  if (mem_len > 0 && (pos == PosMethod::Sinusoidal || pos == PosMethod::Learned || rope_anywhere()))
    bad("--mem-len", "mem_len", std::to_string(mem_len),
        std::string("memory needs positions measured between tokens inside attention (--pos alibi, t5 or none); ") +
            (rope_anywhere() ? "rotary positions with memory are not implemented"
                             : std::string("--pos ") + pos_method_name(pos) +
                                   " adds absolute positions to the embeddings, which restart at every segment"));
  validate_alibi_variants(*this);
}

nlohmann::json TransformerLMConfig::to_json() const { return fields::to_json(fields(), *this); }

TransformerLMConfig TransformerLMConfig::from_json(const nlohmann::json& j) {
  TransformerLMConfig c;
  c.apply_overrides(j, "model config");
  return c;
}

bool TransformerLMConfig::is_key(const std::string& key) { return fields::find(fields(), key) != nullptr; }

void TransformerLMConfig::apply_overrides(const nlohmann::json& j, const std::string& source) {
  fields::apply_model_config(
      fields(), *this, j, source,
      [](const std::string& key) { return "unknown model config key '" + key + "'"; },
      "known keys: decoder_layers, decoder_embed_dim, tokens_per_sample, max_target_positions, pos, ...");
}

std::vector<int64_t> TransformerLMConfig::input_cutoffs() const {
  return parse_cutoffs(adaptive_input_cutoff, "--adaptive-input-cutoff", "adaptive_input_cutoff");
}
std::vector<int64_t> TransformerLMConfig::softmax_cutoffs() const {
  return parse_cutoffs(adaptive_softmax_cutoff, "--adaptive-softmax-cutoff", "adaptive_softmax_cutoff");
}

std::string structural_differences(const TransformerLMConfig& saved, const TransformerLMConfig& wanted) {
  return fields::structural_differences(TransformerLMConfig::fields(), saved, wanted);
}

TransformerLMConfig preset(const std::string& arch) {
  TransformerLMConfig c;
  c.arch = arch;
  if (arch == "transformer_lm") return c;
  if (arch == "transformer_lm_wiki103" || arch == "transformer_lm_baevski_wiki103") {
    c.decoder_layers = 16;
    c.decoder_embed_dim = 1024;
    c.decoder_ffn_embed_dim = 4096;
    c.decoder_attention_heads = 8;
    c.no_decoder_final_norm = true;
    c.dropout = 0.3f;
    c.attention_dropout = 0.1f;
    c.activation_dropout = 0.1f;
    c.adaptive_input = true;  // REFERENCE.md §2.1: transformer_lm_baevski_wiki103
    c.adaptive_input_cutoff = "20000,60000";
    c.adaptive_softmax_cutoff = "20000,60000";
    c.adaptive_softmax_dropout = 0.2f;
    c.tie_adaptive_weights = true;
    c.tie_adaptive_proj = true;
    return c;
  }
  if (arch == "transformer_lm_small") {
    c.decoder_layers = 4;
    c.decoder_embed_dim = 256;
    c.decoder_ffn_embed_dim = 1024;
    c.decoder_attention_heads = 4;
    return c;
  }
  if (arch == "transformer_lm_tiny") {
    c.decoder_layers = 2;
    c.decoder_embed_dim = 128;
    c.decoder_ffn_embed_dim = 512;
    c.decoder_attention_heads = 4;
    return c;
  }
  fail_usage("--arch: unknown architecture '" + arch + "'", "`stretch train --arch help` lists them");
}
}  // namespace stretch::models
