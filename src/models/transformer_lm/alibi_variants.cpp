// models/transformer_lm/alibi_variants.cpp — see alibi_variants.h.
#include "models/transformer_lm/alibi_variants.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.h"
#include "models/transformer_lm/config.h"
#include "ops/alibi.h"

namespace stretch::models {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(text);
  while (std::getline(is, cur, sep)) out.push_back(cur);
  if (!text.empty() && text.back() == sep) out.push_back("");
  return out;
}

// 'text' (appended piecewise: GCC 12's -Wrestrict misfires on "'" + std::string + "'").
std::string quoted(const std::string& text) {
  std::string out(1, '\'');
  out.append(text);
  out.push_back('\'');
  return out;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

[[noreturn]] void bad(const char* flag, const char* key, const std::string& value, const std::string& what,
                      const std::string& hint = "") {
  fail_usage(std::string(flag) + " " + value + " (model config key '" + key + "'): " + what, hint);
}

double parse_number(const std::string& item, const char* flag, const char* key, const std::string& whole) {
  const std::string t = trim(item);
  size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v))
    bad(flag, key, quoted(whole), quoted(t) + " is not a finite number", "write comma-separated numbers, e.g. 0.5,0.25");
  return v;
}

int64_t parse_int(const std::string& item, const char* flag, const char* key, const std::string& whole) {
  const double v = parse_number(item, flag, key, whole);
  if (v != std::floor(v) || v < 0 || v > 1e9)
    bad(flag, key, quoted(whole), quoted(trim(item)) + " is not a non-negative integer");
  return static_cast<int64_t>(v);
}

}  // namespace

std::vector<double> parse_number_list(const std::string& text, const char* flag, const char* key) {
  std::vector<double> out;
  if (trim(text).empty()) return out;
  for (const auto& item : split(text, ',')) out.push_back(parse_number(item, flag, key, text));
  return out;
}

std::vector<AlibiSlopeGroup> parse_slope_groups(const std::string& text) {
  const char* flag = "--alibi-slope-groups";
  const char* key = "alibi_slope_groups";
  std::vector<AlibiSlopeGroup> out;
  if (trim(text).empty()) return out;
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ':');
    if (parts.size() > 2 || parts.empty())
      bad(flag, key, quoted(text), "group " + quoted(item) + " is not heads[:scale]", "e.g. 4:1,4:0.5");
    AlibiSlopeGroup g;
    g.heads = parse_int(parts[0], flag, key, text);
    if (g.heads < 1) bad(flag, key, quoted(text), "a group needs at least one head");
    if (parts.size() == 2) {
      const double s = parse_number(parts[1], flag, key, text);
      if (!(s > 0)) bad(flag, key, quoted(text), "group scale " + quoted(trim(parts[1])) + " must be > 0");
      g.scale = static_cast<float>(s);
    }
    out.push_back(g);
  }
  return out;
}

std::vector<AlibiHeadRef> parse_no_bias_heads(const std::string& text) {
  const char* flag = "--alibi-no-bias-heads";
  const char* key = "alibi_no_bias_heads";
  std::vector<AlibiHeadRef> out;
  if (trim(text).empty()) return out;
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ':');
    if (parts.size() != 2) bad(flag, key, quoted(text), quoted(item) + " is not layer:head", "e.g. 3:0,3:1");
    out.push_back({parse_int(parts[0], flag, key, text), parse_int(parts[1], flag, key, text)});
  }
  return out;
}

bool layer_uses_alibi(const TransformerLMConfig& c, int64_t layer) {
  if (c.pos != PosMethod::Alibi) return false;
  return c.pos_upper == UpperPos::Same || layer < c.pos_upper_from_layer;
}

namespace {

std::vector<double> layer_factors(const TransformerLMConfig& c) {
  const int64_t L = c.decoder_layers;
  const char* flag = "--alibi-layer-scale";
  const char* key = "alibi_layer_scale";
  const std::string t = trim(c.alibi_layer_scale);
  std::vector<double> r(static_cast<size_t>(L), 1.0);
  if (t.empty()) return r;
  if (t.rfind("linear:", 0) == 0) {
    const double top = parse_number(t.substr(7), flag, key, t);
    if (!(top > 0)) bad(flag, key, quoted(t), "the top layer's factor must be > 0");
    for (int64_t l = 0; l < L; ++l) r[l] = L == 1 ? 1.0 : 1.0 + (top - 1.0) * static_cast<double>(l) / (L - 1);
    return r;
  }
  const auto list = parse_number_list(t, flag, key);
  if (static_cast<int64_t>(list.size()) != L)
    bad(flag, key, quoted(t),
        "has " + std::to_string(list.size()) + " factors for " + std::to_string(L) + " layers (--decoder-layers)",
        "give one factor per layer, or linear:F (1 at the bottom layer, F at the top)");
  for (double v : list)
    if (!(v > 0)) bad(flag, key, quoted(t), "every layer factor must be > 0");
  return list;
}

// The base slopes m_h [H].
std::vector<double> base_slopes(const TransformerLMConfig& c) {
  const int64_t H = c.decoder_attention_heads;
  std::vector<double> m;
  if (!trim(c.alibi_slopes).empty()) {
    m = parse_number_list(c.alibi_slopes, "--alibi-slopes", "alibi_slopes");
    if (static_cast<int64_t>(m.size()) != H)
      bad("--alibi-slopes", "alibi_slopes", quoted(c.alibi_slopes),
          "has " + std::to_string(m.size()) + " slopes for " + std::to_string(H) + " heads (--decoder-attention-heads)",
          "give exactly one slope per head");
    for (double v : m)
      if (v < 0) bad("--alibi-slopes", "alibi_slopes", quoted(c.alibi_slopes), "slopes must be >= 0");
    return m;
  }
  const auto groups = parse_slope_groups(c.alibi_slope_groups);
  if (!groups.empty()) {
    int64_t total = 0;
    for (const auto& g : groups) total += g.heads;
    if (total != H)
      bad("--alibi-slope-groups", "alibi_slope_groups", quoted(c.alibi_slope_groups),
          "the groups cover " + std::to_string(total) + " heads, the model has " + std::to_string(H) +
              " (--decoder-attention-heads)",
          "the group sizes must add up to the head count");
    for (const auto& g : groups)
      for (float s : ops::alibi_slopes(static_cast<int>(g.heads))) m.push_back(static_cast<double>(s) * g.scale);
    return m;
  }
  for (float s : ops::alibi_slopes(static_cast<int>(H))) m.push_back(s);
  return m;
}

}  // namespace

void validate_alibi_variants(const TransformerLMConfig& c) {
  const bool alibi = c.pos == PosMethod::Alibi;
  auto needs_alibi = [&](bool set, const char* flag) {
    if (set && !alibi)
      fail_usage(std::string(flag) + " is an ALiBi variant, but --pos is " + pos_method_name(c.pos),
                 "use --pos alibi (the default), or drop " + std::string(flag));
  };
  needs_alibi(!trim(c.alibi_slopes).empty(), "--alibi-slopes");
  needs_alibi(!trim(c.alibi_slope_groups).empty(), "--alibi-slope-groups");
  needs_alibi(!trim(c.alibi_layer_scale).empty(), "--alibi-layer-scale");
  needs_alibi(!trim(c.alibi_no_bias_heads).empty(), "--alibi-no-bias-heads");
  needs_alibi(c.alibi_learnable_slopes, "--alibi-learnable-slopes");
  needs_alibi(c.alibi_shape != ops::AlibiShape::Linear, "--alibi-shape");
  needs_alibi(c.alibi_slope_warmup_updates != 0, "--alibi-slope-warmup-updates");
  needs_alibi(c.pos_upper != UpperPos::Same, "--pos-upper");
  if (!trim(c.alibi_slopes).empty() && !trim(c.alibi_slope_groups).empty())
    fail_usage("--alibi-slopes and --alibi-slope-groups both set the base slopes", "give one of them");
  if (c.alibi_positive_slopes && !c.alibi_learnable_slopes)
    fail_usage("--alibi-positive-slopes keeps learnable slopes >= 0, but the slopes are fixed",
               "add --alibi-learnable-slopes, or drop --alibi-positive-slopes");
  if (c.alibi_shape == ops::AlibiShape::Clipped && c.alibi_clip_distance < 1)
    bad("--alibi-clip-distance", "alibi_clip_distance", std::to_string(c.alibi_clip_distance),
        "--alibi-shape clipped needs a distance >= 1 after which the bias stays constant", "e.g. --alibi-clip-distance 32");
  if (c.alibi_shape != ops::AlibiShape::Clipped && c.alibi_clip_distance != 0)
    fail_usage("--alibi-clip-distance " + std::to_string(c.alibi_clip_distance) + " applies to --alibi-shape clipped only",
               "add --alibi-shape clipped, or drop --alibi-clip-distance");
  if (c.alibi_clip_distance >= (int64_t{1} << 24))
    bad("--alibi-clip-distance", "alibi_clip_distance", std::to_string(c.alibi_clip_distance), "must be < 2^24");
  if (c.alibi_slope_warmup_updates < 0)
    bad("--alibi-slope-warmup-updates", "alibi_slope_warmup_updates", std::to_string(c.alibi_slope_warmup_updates),
        "must be an integer >= 0 (0: no warm-up)");
  if (!(c.alibi_slope_warmup_init > 0.f && c.alibi_slope_warmup_init <= 1.f))
    bad("--alibi-slope-warmup-init", "alibi_slope_warmup_init", std::to_string(c.alibi_slope_warmup_init),
        "must be a fraction in (0, 1]");
  if (c.pos_upper != UpperPos::Same &&
      (c.pos_upper_from_layer < 1 || c.pos_upper_from_layer >= c.decoder_layers))
    bad("--pos-upper-from-layer", "pos_upper_from_layer", std::to_string(c.pos_upper_from_layer),
        "--pos-upper needs a first upper layer K with 1 <= K < --decoder-layers (" + std::to_string(c.decoder_layers) + ")",
        "layers 0..K-1 keep ALiBi, K..L-1 use --pos-upper");
  if (c.pos_upper == UpperPos::Same && c.pos_upper_from_layer != 0)
    fail_usage("--pos-upper-from-layer " + std::to_string(c.pos_upper_from_layer) + " without --pos-upper",
               "add --pos-upper rope|t5|none");
  if (!alibi) return;
  (void)layer_factors(c);
  (void)base_slopes(c);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto& r : parse_no_bias_heads(c.alibi_no_bias_heads)) {
    const std::string v = std::to_string(r.layer) + ":" + std::to_string(r.head);
    if (r.layer >= c.decoder_layers || r.head >= c.decoder_attention_heads)
      bad("--alibi-no-bias-heads", "alibi_no_bias_heads", quoted(c.alibi_no_bias_heads),
          v + " is outside layers 0.." + std::to_string(c.decoder_layers - 1) + " and heads 0.." +
              std::to_string(c.decoder_attention_heads - 1));
    if (!layer_uses_alibi(c, r.layer))
      bad("--alibi-no-bias-heads", "alibi_no_bias_heads", quoted(c.alibi_no_bias_heads),
          v + ": layer " + std::to_string(r.layer) + " does not use ALiBi (--pos-upper-from-layer)");
    if (!seen.insert({r.layer, r.head}).second)
      bad("--alibi-no-bias-heads", "alibi_no_bias_heads", quoted(c.alibi_no_bias_heads), v + " is given twice");
  }
  if (!seen.empty() && c.alibi_learnable_slopes)
    fail_usage("--alibi-no-bias-heads with --alibi-learnable-slopes: a learnable slope would leave 0",
               "use one of them (fixed slopes keep the chosen heads without bias)");
}

std::vector<std::vector<float>> alibi_layer_slopes(const TransformerLMConfig& c) {
  const int64_t L = c.decoder_layers, H = c.decoder_attention_heads;
  std::vector<std::vector<float>> out(static_cast<size_t>(L));
  if (c.pos != PosMethod::Alibi) return out;
  const std::vector<double> m = base_slopes(c);
  const std::vector<double> r = layer_factors(c);
  for (int64_t l = 0; l < L; ++l) {
    if (!layer_uses_alibi(c, l)) continue;
    out[l].resize(static_cast<size_t>(H));
    // Plain ALiBi keeps ops::alibi_slopes' floats bit for bit (m·1 in double rounds back to them).
    for (int64_t h = 0; h < H; ++h) out[l][h] = static_cast<float>(m[h] * r[l]);
  }
  for (const auto& ref : parse_no_bias_heads(c.alibi_no_bias_heads)) out[ref.layer][ref.head] = 0.f;
  return out;
}

float alibi_warmup_factor(const TransformerLMConfig& c, uint64_t update) {
  const int64_t N = c.alibi_slope_warmup_updates;
  if (N <= 0) return 1.f;
  const double F = c.alibi_slope_warmup_init;
  const double frac = std::min(1.0, static_cast<double>(update) / static_cast<double>(N));
  return static_cast<float>(F + (1.0 - F) * frac);
}

std::string alibi_variant_summary(const TransformerLMConfig& c) {
  if (c.pos != PosMethod::Alibi) return "";
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (!trim(c.alibi_slopes).empty()) add("slopes=" + c.alibi_slopes);
  if (!trim(c.alibi_slope_groups).empty()) add("groups=" + c.alibi_slope_groups);
  if (!trim(c.alibi_layer_scale).empty()) add("layer_scale=" + c.alibi_layer_scale);
  if (!trim(c.alibi_no_bias_heads).empty()) add("no_bias=" + c.alibi_no_bias_heads);
  if (c.alibi_learnable_slopes) add(c.alibi_positive_slopes ? "learnable(>=0)" : "learnable");
  if (c.alibi_shape != ops::AlibiShape::Linear) {
    std::string shape = "shape=";
    shape.append(alibi_shape_name(c.alibi_shape));
    if (c.alibi_shape == ops::AlibiShape::Clipped) shape.append("@").append(std::to_string(c.alibi_clip_distance));
    add(shape);
  }
  if (c.alibi_slope_warmup_updates > 0)
    add("warmup=" + std::to_string(c.alibi_slope_warmup_updates) + "x" + std::to_string(c.alibi_slope_warmup_init));
  if (c.pos_upper != UpperPos::Same)
    add(std::string("upper=").append(upper_pos_name(c.pos_upper)).append("@").append(std::to_string(c.pos_upper_from_layer)));
  return s;
}

}  // namespace stretch::models
