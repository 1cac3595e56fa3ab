// cli/config_file.h — `--config FILE` for a subcommand: a JSON object whose keys are flag
// names without dashes (underscores or dashes both accepted), e.g. {"lr": 1.0, "max_update": 100}.
// Nested objects are flattened, so the output of `--dump-config` (fairseq-style groups such as
// {"optimizer": {"_name": "nag", "momentum": 0.99}}) and a checkpoint's config read back as
// they were written: a group's "_name" is the value of the flag named like the group
// (optimizer, lr_scheduler, task). Keys listed in `derived_keys` (values the run derives,
// like the vocabulary size from dict.txt) are accepted and ignored with a note. A key given
// twice (e.g. tokens_per_sample in two groups) must have one value. An unknown key is a usage
// error naming it, exactly like an unknown flag. Flags given on the command line win.
// How: CLI11 (2.1) never reads a subcommand's config file, so main() parses once, asks
// json_config_arguments() for the command line with the file's values appended as flags
// (only for flags not given), and parses that again.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stretch::cli {

void enable_json_config(CLI::App& sub, std::set<std::string> derived_keys = {});

// After a first parse of `args` (argv without the program name): when a parsed subcommand got
// --config FILE, the arguments to parse again; std::nullopt otherwise. Errors (unreadable
// file, bad JSON, unknown key) are stretch usage errors naming the file and key.
std::optional<std::vector<std::string>> json_config_arguments(CLI::App& app, const std::vector<std::string>& args);

}  // namespace stretch::cli
