// cli/subcommand_name.h — the first argument of `stretch`, checked before CLI11 sees it: a word
// that is not a subcommand (nor an option such as --help) is a usage error naming it, listing the
// subcommands and suggesting the nearest one ("unknown subcommand 'trian'; did you mean 'train'?").
#pragma once
#include <string>
#include <vector>

namespace stretch::cli {
// Levenshtein distance (insertions, deletions, substitutions), for did-you-mean suggestions.
size_t edit_distance(const std::string& a, const std::string& b);
// The name within distance max(2, |word| / 3) of `word` closest to it; "" when none is.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names);
// Nothing when `arg` starts with '-' or is one of `names`; else fail_usage as above.
void check_subcommand_name(const std::string& arg, const std::vector<std::string>& names);
}  // namespace stretch::cli
