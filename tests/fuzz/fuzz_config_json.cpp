// tests/fuzz/fuzz_config_json.cpp — the --config JSON reader (cli/config_file.h) on a subcommand
// with the kinds of flags stretch has (number, integer, choice, flag, list). Any file is either a
// command line that CLI11 parses or rejects with a ParseError, or one stretch::Error (a usage
// error naming --config and the key).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/config_file.h"
#include "core/error.h"
#include "fuzz_input.h"

namespace {
struct Flags {
  double lr = 0;
  int64_t max_update = 0;
  std::string optimizer = "adam";
  bool no_progress_bar = false;
  std::vector<int> update_freq;
  std::vector<double> betas;
};

CLI::App& app() {
  static Flags flags;
  static CLI::App* a = [] {
    auto* root = new CLI::App("fuzz");
    root->require_subcommand(1);
    CLI::App* sub = root->add_subcommand("train", "train");
    sub->add_option("--lr", flags.lr);
    sub->add_option("--max-update", flags.max_update);
    sub->add_option("--optimizer", flags.optimizer)->check(CLI::IsMember({"adam", "nag", "sgd"}));
    sub->add_flag("--no-progress-bar", flags.no_progress_bar);
    sub->add_option("--update-freq", flags.update_freq)->delimiter(',');
    sub->add_option("--adam-betas", flags.betas)->expected(2);
    stretch::cli::enable_json_config(*sub, {"vocab_size"});
    return root;
  }();
  return *a;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = stretch::fuzz::write_input("config.json", data, size);
  const std::vector<std::string> args = {"train", "--config", path};
  CLI::App& a = app();
  try {
    a.clear();
    std::vector<std::string> rev(args.rbegin(), args.rend());
    a.parse(rev);
    if (auto again = stretch::cli::json_config_arguments(a, args)) {
      std::reverse(again->begin(), again->end());
      a.clear();
      a.parse(*again);
    } else {
      std::abort();  // --config was given: the reader must have run
    }
  } catch (const CLI::ParseError&) {
  } catch (const stretch::Error& e) {
    if (e.kind() != stretch::ErrorKind::Usage) std::abort();
  }
  return 0;
}
