// models/transformer_lm/alibi_variants.h — the ALiBi research variants of the transformer_lm
// family (issue 15; seed 002 §4-6): how the config's text fields are read and what slopes each
// layer gets. Contract (docs/architecture.md "ALiBi variants"):
//   base slopes m_h (h < H), one of
//     rule      ops::alibi_slopes(H)                                   (default)
//     list      --alibi-slopes a,b,...      exactly H finite numbers >= 0
//     groups    --alibi-slope-groups n1:s1,n2:s2,...   Σ n_g = H; group g's heads get
//               ops::alibi_slopes(n_g)·s_g (seed 002 §5.3: text heads 1, image heads 0.5)
//   layer factor r_l (l < L), one of
//     none      1
//     list      --alibi-layer-scale r0,r1,...    exactly L finite numbers > 0
//     linear:F  r_l = 1 + (F − 1)·l/(L − 1)      (1 at the bottom, F at the top; seed 002 §4.2)
//   no-bias heads  --alibi-no-bias-heads l:h,l:h,...  (seed 002 §5.2): slope 0 there
//   slope of layer l, head h = m_h·r_l (0 for a no-bias head).
//   Slope warm-up (seed 002 §5.1): training multiplies every slope by
//     w(u) = F + (1 − F)·min(1, u/N)    (u: the update number, N > 0 updates, F in (0, 1])
//   a pure function of u, so a resumed run continues exactly; evaluation (validation, eval-lm,
//   sweep, generate) uses w = 1, the target slopes.
// Every error names the flag and the config key. Nothing else computes a slope: the rule is
// ops::alibi_slopes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stretch::models {

struct TransformerLMConfig;

// A parsed "--alibi-slope-groups" entry.
struct AlibiSlopeGroup {
  int64_t heads = 0;
  float scale = 1.f;
};

// Head h of layer l has no bias.
struct AlibiHeadRef {
  int64_t layer = 0, head = 0;
};

// Comma-separated numbers of `flag` (config key `key`); an empty text gives an empty list.
std::vector<double> parse_number_list(const std::string& text, const char* flag, const char* key);
std::vector<AlibiSlopeGroup> parse_slope_groups(const std::string& text);
std::vector<AlibiHeadRef> parse_no_bias_heads(const std::string& text);

// Checks every ALiBi variant field of c (usage errors naming the flag).
void validate_alibi_variants(const TransformerLMConfig& c);
// True when layer l uses ALiBi (pos = alibi and l below --pos-upper-from-layer when set).
bool layer_uses_alibi(const TransformerLMConfig& c, int64_t layer);
// The slopes [L][H] of the contract above (rows of non-ALiBi layers are empty).
std::vector<std::vector<float>> alibi_layer_slopes(const TransformerLMConfig& c);
// w(u) of the slope warm-up (1 when warm-up is off).
float alibi_warmup_factor(const TransformerLMConfig& c, uint64_t update);
// One line describing the variant for logs ("" for plain ALiBi).
std::string alibi_variant_summary(const TransformerLMConfig& c);

}  // namespace stretch::models
