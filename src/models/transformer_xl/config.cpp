// models/transformer_xl/config.cpp — the transformer_xl field table, presets and checks.
#include "models/transformer_xl/config.h"

#include <cmath>

#include "core/error.h"
#include "models/apply_model_config.h"

namespace stretch::models {
namespace {

// fairseq's List[int] spellings: "20000,40000", "[20000, 40000]", "" (none).
std::vector<int64_t> parse_int_list(const std::string& text) {
  std::vector<int64_t> out;
  std::string s;
  for (char ch : text)
    if (ch != '[' && ch != ']' && ch != ' ') s += ch;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, end - pos);
    const std::optional<int64_t> v = parse_integer(item);
    if (!v || *v <= 0)
      fail_usage("--cutoffs '" + text + "' (model config key 'cutoffs'): '" + item + "' is not a positive integer",
                 "give increasing word ids separated by commas, e.g. 20000,40000,200000");
    out.push_back(*v);
    pos = end + 1;
  }
  return out;
}

void positive(int64_t v, const char* flag, const char* key) {
  if (v <= 0)
    fail_usage(std::string(flag) + " " + std::to_string(v) + " (model config key '" + key + "') must be positive",
               "give a positive integer");
}

void probability(float p, const char* flag, const char* key) {
  if (!(p >= 0.f && p < 1.f))
    fail_usage(std::string(flag) + " " + std::to_string(p) + " (model config key '" + key + "') must be in [0, 1)",
               "give a dropout probability in [0, 1)");
}

}  // namespace

const std::vector<Field<TransformerXLConfig>>& TransformerXLConfig::fields() {
  using C = TransformerXLConfig;
  using R = FieldRole;
  using namespace fields;
  static const std::vector<Field<C>> table = {
      text(&C::arch, {.key = "arch", .role = R::Free}),
      number(&C::vocab_size, {.key = "vocab_size", .help = "from dict.txt"}),
      number(&C::padding_idx, {.key = "padding_idx", .help = "from dict.txt"}),
      number(&C::n_layer, {.key = "n_layer", .flag = "--n-layer", .help = "transformer_xl: layers L"}),
      number(&C::d_model, {.key = "d_model", .flag = "--d-model", .help = "transformer_xl: model dim C (= d_embed)"}),
      number(&C::n_head, {.key = "n_head", .flag = "--n-head", .help = "transformer_xl: heads H"}),
      number(&C::d_head, {.key = "d_head", .flag = "--d-head", .help = "transformer_xl: head dim D"}),
      number(&C::d_inner, {.key = "d_inner", .flag = "--d-inner", .help = "transformer_xl: FFN inner dim"}),
      number(&C::div_val, {.key = "div_val", .flag = "--div-val",
                           .help = "transformer_xl: band i of the adaptive embedding/softmax has dimension "
                                   "d_model // div_val^i (1: one table, no projections)"}),
      text(&C::cutoffs, {.key = "cutoffs", .flag = "--cutoffs",
                         .help = "transformer_xl: adaptive softmax/embedding cutoffs (those >= V are dropped; none left: "
                                 "the full softmax)"}),
      number(&C::mem_len, {.key = "mem_len", .flag = "--mem-len", .role = R::Free}),
      number(&C::clamp_len, {.key = "clamp_len", .flag = "--clamp-len",
                             .help = "transformer_xl: distances beyond it use the embedding of clamp_len (<= 0: off)",
                             .role = R::Free}),
      boolean(&C::same_length, {.key = "same_length", .flag = "--same-length",
                                .help = "transformer_xl: every query sees exactly mem_len keys", .role = R::Free}),
      number(&C::dropout, {.key = "dropout", .flag = "--dropout", .role = R::Free}),
      number(&C::dropatt, {.key = "dropatt", .flag = "--dropatt",
                           .help = "transformer_xl: attention-probability dropout", .role = R::Free}),
      boolean(&C::untie_r, {.key = "untie_r", .flag = "--untie-r",
                            .help = "transformer_xl: r_w_bias/r_r_bias per layer (HF's and fairseq's default)"}),
      boolean(&C::xl_original, {.key = "xl_original", .flag = "--xl-original",
                                .help = "transformer_xl: the original code's empty first memory and one shared "
                                        "(r_w_bias, r_r_bias) pair (default: HF's zero memories, per-layer pairs)"}),
      text(&C::criterion, {.key = "criterion", .flag = "--criterion", .role = R::Free}),
      number(&C::tokens_per_sample, {.key = "tokens_per_sample", .role = R::Free}),
      number(&C::max_target_positions, {.key = "max_target_positions", .role = R::Free}),
  };
  return table;
}

std::vector<int64_t> TransformerXLConfig::kept_cutoffs() const {
  std::vector<int64_t> out;
  for (int64_t c : parse_int_list(cutoffs))
    if (vocab_size <= 0 || c < vocab_size) out.push_back(c);
  return out;
}

void TransformerXLConfig::validate() const {
  positive(n_layer, "--n-layer", "n_layer");
  positive(d_model, "--d-model", "d_model");
  positive(n_head, "--n-head", "n_head");
  positive(d_head, "--d-head", "d_head");
  positive(d_inner, "--d-inner", "d_inner");
  if (d_model % 2 != 0)
    fail_usage("--d-model " + std::to_string(d_model) + " (model config key 'd_model') must be even",
               "the sinusoidal relative embedding has d_model/2 sin and cos pairs");
  if (mem_len < 0)
    fail_usage("--mem-len " + std::to_string(mem_len) + " (model config key 'mem_len') must be >= 0",
               "give 0 for no memory");
  if (same_length && mem_len <= 0)
    fail_usage("--same-length needs --mem-len > 0 (model config key 'same_length' with mem_len " +
                   std::to_string(mem_len) + ")",
               "each query sees exactly mem_len keys; with mem_len 0 it would see none");
  probability(dropout, "--dropout", "dropout");
  probability(dropatt, "--dropatt", "dropatt");
  if (criterion != "cross_entropy")
    fail_usage("--criterion " + criterion + " (model config key 'criterion'): transformer_xl trains with cross_entropy",
               "drop --criterion (fairseq's transformer_xl recipe uses cross_entropy)");
  const std::vector<int64_t> all = parse_int_list(cutoffs);  // which remain depends on V (check_vocabulary)
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i] <= all[i - 1])
      fail_usage("--cutoffs " + cutoffs + " (model config key 'cutoffs'): " + std::to_string(all[i]) +
                     " does not follow " + std::to_string(all[i - 1]) + " upwards",
                 "give increasing word ids, e.g. 20000,40000,200000");
  if (div_val < 1)
    fail_usage("--div-val " + std::to_string(div_val) + " (model config key 'div_val') must be >= 1",
               "give 1 (one embedding table, no projections) or the divisor of each band's dimension");
}

void TransformerXLConfig::check_vocabulary() const {
  const int64_t bands = static_cast<int64_t>(kept_cutoffs().size()) + 1;
  if (div_val > 1) {
    int64_t d = d_model;
    for (int64_t i = 1; i < bands; ++i) d /= div_val;
    if (d <= 0)
      fail_usage("--div-val " + std::to_string(div_val) + " (model config key 'div_val') with --d-model " +
                     std::to_string(d_model) + " and " + std::to_string(bands) +
                     " vocabulary bands gives the last band an embedding of dimension 0 (d_model // div_val^i)",
                 "use a smaller --div-val, fewer --cutoffs or a larger --d-model");
  }
}

nlohmann::json TransformerXLConfig::to_json() const { return fields::to_json(fields(), *this); }

TransformerXLConfig TransformerXLConfig::from_json(const nlohmann::json& j) {
  TransformerXLConfig c;
  c.apply_overrides(j, "model config");
  return c;
}

bool TransformerXLConfig::is_key(const std::string& key) { return fields::find(fields(), key) != nullptr; }

void TransformerXLConfig::apply_overrides(const nlohmann::json& j, const std::string& source) {
  fields::apply_model_config(
      fields(), *this, j, source,
      [](const std::string& key) { return "unknown transformer_xl config key '" + key + "'"; },
      "known keys: n_layer, d_model, n_head, d_head, d_inner, div_val, cutoffs, mem_len, clamp_len, "
      "same_length, dropout, dropatt, untie_r, xl_original");
}

std::string structural_differences(const TransformerXLConfig& saved, const TransformerXLConfig& wanted) {
  return fields::structural_differences(TransformerXLConfig::fields(), saved, wanted);
}

TransformerXLConfig transformer_xl_preset(const std::string& arch) {
  TransformerXLConfig c;
  c.arch = arch;
  if (arch == "transformer_xl") return c;
  if (arch == "transformer_xl_enwik8") {
    c.n_layer = 12, c.d_model = 512, c.n_head = 8, c.d_head = 64, c.d_inner = 2048;
    c.dropout = 0.1f, c.mem_len = 512;
    return c;
  }
  if (arch == "transformer_xl_tiny") {
    c.n_layer = 2, c.d_model = 64, c.n_head = 4, c.d_head = 16, c.d_inner = 128;
    return c;
  }
  fail_usage("--arch: unknown architecture '" + arch + "'", "`stretch train --arch help` lists them");
}

}  // namespace stretch::models
