// cli/subcommand_name.cpp — unknown-subcommand errors with a suggestion (contract in the header).
#include "cli/subcommand_name.h"

#include <algorithm>

#include "core/error.h"

namespace stretch::cli {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);  // [|b| + 1]: distances of a[0, i) to each prefix of b
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_d) best = n, best_d = d;
  }
  return best;
}

void check_subcommand_name(const std::string& arg, const std::vector<std::string>& names) {
  if (arg.empty() || arg[0] == '-' || std::find(names.begin(), names.end(), arg) != names.end()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  const std::string near = nearest_name(arg, names);
  fail_usage("unknown subcommand '" + arg + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"),
             "the subcommands are " + list + "; `stretch --help` describes them");
}

}  // namespace stretch::cli
