// cli/model_flags.h — the transformer_lm model flags (fairseq names), shared by `train` and
// anything else that builds a model from flags. resolve() applies --arch's preset first, then
// the flags that were actually given, as fairseq's architecture functions do.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/transformer_lm_config.h"

namespace stretch::cli {

struct ModelFlags {
  std::string arch = "transformer_lm";
  nlohmann::json given;                // flags given on the command line, by fairseq key
  std::vector<CLI::Option*> options;   // to find out which were given
  std::vector<std::string> keys;
  bool post_norm = false;
  models::TransformerLMConfig resolve(int64_t tokens_per_sample);
};

void add_model_flags(CLI::App& sub, ModelFlags& flags);

}  // namespace stretch::cli
