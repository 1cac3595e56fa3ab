// train/memory_estimate.cpp — the model-size check before allocation (contract in the header).
#include "train/memory_estimate.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace stretch::train {
namespace {

double number(const nlohmann::json& c, const char* key) {
  const auto it = c.find(key);
  return it != c.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string gigabytes(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, bytes >= 1e12 ? "%.3g TB" : "%.1f GB", bytes >= 1e12 ? bytes / 1e12 : bytes / 1e9);
  return buf;
}

}  // namespace

double training_bytes(const nlohmann::json& c) {
  if (c.contains("attn_span")) {  // adaptive_span
    const double L = number(c, "n_layer"), C = number(c, "d_model"), F = number(c, "d_inner"), V = number(c, "vocab_size"),
                 H = number(c, "n_head"), S = number(c, "attn_span");
    const double params = 2 * V * C + V + (H > 0 ? C / H : 0) * S + L * (4 * C * C + 2 * C * F + F + 5 * C + H);
    return params * 12.0;
  }
  const double L = number(c, "decoder_layers"), C = number(c, "decoder_embed_dim"),
               F = number(c, "decoder_ffn_embed_dim"), V = number(c, "vocab_size");
  const bool shared = c.value("share_decoder_input_output_embed", false);
  const double params = V * C * (shared ? 1 : 2) + L * (4 * C * C + 2 * C * F + 9 * C + F);
  return params * 16.0;
}

double available_memory_bytes() {
  if (const char* limit = std::getenv("STRETCH_MEMORY_LIMIT_BYTES")) return std::strtod(limit, nullptr);
  std::ifstream in("/proc/meminfo");
  double kb = 0;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream is(line);
    std::string key;
    double v = 0;
    is >> key >> v;
    if (key == "MemAvailable:" || key == "SwapFree:") kb += v, found = true;
  }
  if (found) return kb * 1024.0;
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
}

void check_training_memory(const nlohmann::json& c) {
  const double need = training_bytes(c), have = available_memory_bytes();
  if (need <= have) return;
  std::ostringstream what;
  if (c.contains("attn_span")) {
    what << "--n-layer " << number(c, "n_layer") << ", --d-model " << number(c, "d_model") << ", --d-inner "
         << number(c, "d_inner") << ", --attn-span " << number(c, "attn_span") << " and a vocabulary of "
         << number(c, "vocab_size");
    fail_usage(what.str() + ": the model needs at least " + gigabytes(need) +
                   " to train (fp32 weights, gradients and optimizer state), more than the " + gigabytes(have) +
                   " of memory available",
               "choose fewer layers or a smaller --d-model / --d-inner");
  }
  what << "--decoder-layers " << number(c, "decoder_layers") << ", --decoder-embed-dim " << number(c, "decoder_embed_dim")
       << ", --decoder-ffn-embed-dim " << number(c, "decoder_ffn_embed_dim") << " and a vocabulary of "
       << number(c, "vocab_size");
  fail_usage(what.str() + ": the model needs at least " + gigabytes(need) +
                 " to train (fp32 weights, gradients and optimizer state), more than the " + gigabytes(have) +
                 " of memory available",
             "choose fewer layers or a smaller --decoder-embed-dim / --decoder-ffn-embed-dim");
}

}  // namespace stretch::train
