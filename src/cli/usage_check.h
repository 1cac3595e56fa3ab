// cli/usage_check.h — every unknown flag and stray argument of a subcommand, reported at once.
// CLI11 stops at the first problem it meets (often "--path is required" when the real cause was a
// misspelt "--pathh"), lists extras last-first and unquoted. This walks the command line in order
// against the subcommand's declared options before CLI11 parses it and, when something is wrong,
// returns one message: each unknown flag with the nearest known flag as "did you mean", each
// stray or blank argument quoted. A known option's value is skipped (one, or for a list option
// every following non-flag argument); an unknown flag's own "=value" or following value is taken
// as its value and not reported again.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace stretch::cli {

// `args` are the subcommand's arguments (after its name). std::nullopt: nothing unknown.
std::optional<std::string> unknown_arguments_report(const CLI::App& sub, const std::vector<std::string>& args);

// The known flag nearest to `flag` (edit distance, '_' and '-' alike), or "" when none is close.
std::string nearest_flag(const CLI::App& sub, const std::string& flag);

}  // namespace stretch::cli
