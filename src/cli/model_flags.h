// cli/model_flags.h — the model flags (fairseq names) of every family, generated from the
// families' field tables (models/registry.h: fields()), shared by `train` and anything else
// that builds a model from flags. resolve() applies --arch's preset first, then the flags that
// were actually given, as fairseq's architecture functions do. `--arch help` lists the names.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace stretch::cli {

struct ModelFlags {
  std::string arch = "transformer_lm";
  nlohmann::json given = nlohmann::json::object();  // flags given on the command line, by fairseq key
  bool post_norm = false;
  bool decoder_learned_pos = false;          // fairseq's spelling of --pos learned
  bool no_token_positional_embeddings = false;  // fairseq's spelling of --pos none
  bool wants_help() const { return arch == "help"; }
  // The full model config (JSON, fairseq keys) for training length L.
  nlohmann::json resolve(int64_t tokens_per_sample) const;
};

void add_model_flags(CLI::App& sub, ModelFlags& flags);
// Model config keys without a flag of their own (derived from dict.txt, or evaluation-only):
// a --config file may hold them (a checkpoint's config does); they are ignored there.
std::set<std::string> derived_model_keys();
// fairseq writes boolean model options with a value too (`--adapt-span-layer True`, as its
// configs and hydra print them): a boolean model flag followed by True/False/true/false/1/0 is
// joined into CLI11's `--flag=value` form (argv as given; other arguments are left alone).
void join_boolean_flag_values(std::vector<std::string>& args);

}  // namespace stretch::cli
