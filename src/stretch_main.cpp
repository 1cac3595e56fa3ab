// stretch_main.cpp — the `stretch` binary: one program, fairseq-style subcommands.
// Exit codes: 0 success, 1 runtime error (bad file, NaN loss, ...), 2 usage error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <new>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/config_file.h"
#include "cli/model_flags.h"
#include "cli/overrides.h"
#include "cli/usage_check.h"
#include "cli/subcommand_name.h"
#include "core/error.h"
#include "core/memory_limit_crash.h"
#include "core/signals.h"
#include "stretch/version.h"

int main(int argc, char** argv) {
  // Under a memory limit (ulimit -v) a failed allocation inside oneDNN, or the signal thread's
  // creation below, crashes or aborts: say so instead (core/memory_limit_crash.h). Starts no thread.
  stretch::report_crashes_under_memory_limit();
  // First, before any OpenMP / oneDNN / MPI thread exists: SIGINT and SIGTERM go to one thread
  // (core/signals.h; oneDNN issue #4845).
  stretch::receive_stop_signals();
  using namespace stretch::cli;
  CLI::App app{"stretch: train short, test long. Transformer language models with ALiBi and the "
               "baselines it is judged against, with fairseq's flags and file formats."};
  app.set_version_flag("--version", std::string("stretch ") + STRETCH_VERSION + "\n");
  app.require_subcommand(1);
  app.fallthrough(false);

  struct Entry {
    const char* name;
    const char* help;
    void (*add)(CLI::App&, Runner&);
  };
  const Entry entries[] = {
      {"preprocess", "text to a fairseq dictionary and binarized splits", add_preprocess},
      {"train", "train a language model", add_train},
      {"eval-lm", "perplexity / bits per byte at any length", add_eval_lm},
      {"sweep", "train-short-test-long extrapolation table and plot", add_sweep},
      {"generate", "sample from a model with a KV cache", add_generate},
      {"info", "describe a checkpoint, data directory or this build", add_info},
      {"import-fairseq", "a fairseq checkpoint (.pt) to a stretch model file", add_import_fairseq},
      {"export-fairseq", "a stretch model to a checkpoint fairseq-eval-lm loads", add_export_fairseq},
  };
  std::vector<std::pair<CLI::App*, Runner>> commands;
  commands.reserve(std::size(entries));
  for (const auto& e : entries) {
    CLI::App* sub = app.add_subcommand(e.name, e.help);
    commands.emplace_back(sub, Runner{});
    e.add(*sub, commands.back().second);
  }

  // `--adapt-span-layer True` (fairseq's spelling with a value) → `--adapt-span-layer=true`.
  std::vector<std::string> args(argv + 1, argv + argc);
  join_boolean_flag_values(args);
  // bash's brace expansion of an unquoted --model-overrides {k:v,k:v} back into one dict.
  join_brace_expanded_overrides(args);
  // Every unknown flag and stray argument at once, in command-line order (cli/usage_check.h),
  // before CLI11 stops at the first problem it meets.
  if (argc > 1)
    for (auto& [sub, run] : commands)
      if (sub->get_name() == argv[1]) {
        if (auto report = unknown_arguments_report(*sub, std::vector<std::string>(args.begin() + 1, args.end()))) {
          std::cerr << "stretch: error: " << *report << "\n";
          return 2;
        }
      }
  try {
    // `stretch frobnicate`: CLI11 alone says "A subcommand is required".
    if (argc > 1) {
      std::vector<std::string> names;
      for (const auto& e : entries) names.emplace_back(e.name);
      check_subcommand_name(argv[1], names);
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes a vector last-first
    app.parse(reversed);
    // A subcommand's --config FILE: parse again with the file's values (cli/config_file.h).
    if (auto again = json_config_arguments(app, args)) {
      std::reverse(again->begin(), again->end());  // CLI11 takes a vector of arguments last-first
      app.clear();
      app.parse(*again);
    }
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const stretch::Error& e) {
    std::cerr << "stretch: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "stretch: error: " << e.what() << "\n";
    return 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run ? run() : 2;
    return 2;
  } catch (const stretch::Error& e) {
    std::cerr << "stretch: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    // Models too large for the machine are refused before allocation (train/memory_estimate.h);
    // this is activations, data or a memory limit such as `ulimit -v`.
    std::cerr << "stretch: error: out of memory (std::bad_alloc)\n  hint: a memory limit (ulimit -v, a cgroup) or "
                 "the machine's memory is too small for this run: lower --max-tokens / --batch-size / "
                 "--tokens-per-sample, or the model size\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "stretch: error: " << e.what() << "\n";
    return 1;
  }
}
