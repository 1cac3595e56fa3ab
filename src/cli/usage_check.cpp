#include "cli/usage_check.h"

#include <algorithm>
#include <cctype>

namespace stretch::cli {
namespace {

// Levenshtein distance, '_' and '-' counted as the same character.
size_t edit_distance(const std::string& a, const std::string& b) {
  auto same = [](char x, char y) { return x == y || ((x == '_' || x == '-') && (y == '_' || y == '-')); };
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const CLI::Option* find_long(const CLI::App& sub, const std::string& name) {
  for (const CLI::Option* o : sub.get_options()) {
    const auto& l = o->get_lnames();
    if (std::find(l.begin(), l.end(), name) != l.end()) return o;
  }
  return nullptr;
}

const CLI::Option* find_short(const CLI::App& sub, const std::string& name) {
  for (const CLI::Option* o : sub.get_options()) {
    const auto& s = o->get_snames();
    if (std::find(s.begin(), s.end(), name) != s.end()) return o;
  }
  return nullptr;
}

bool looks_like_flag(const std::string& a) {
  if (a.size() < 2 || a[0] != '-') return false;
  // A negative number is a value, not a flag.
  return !(std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.');
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::string nearest_flag(const CLI::App& sub, const std::string& flag) {
  std::string name = flag;
  while (!name.empty() && name[0] == '-') name.erase(0, 1);
  std::string best;
  size_t best_d = std::string::npos;
  for (const CLI::Option* o : sub.get_options())
    for (const std::string& l : o->get_lnames()) {
      const size_t d = edit_distance(name, l);
      if (d < best_d) best_d = d, best = l;
    }
  // Close enough to be a slip: a quarter of the name's letters, at least 2.
  if (best.empty() || best_d > std::max<size_t>(2, name.size() / 4)) return "";
  return "--" + best;
}

std::optional<std::string> unknown_arguments_report(const CLI::App& sub, const std::vector<std::string>& args) {
  if (sub.get_allow_extras()) return std::nullopt;
  // How many positional values the subcommand takes (a list positional: any number).
  size_t positional_room = 0;
  std::vector<std::string> positional_names;
  for (const CLI::Option* o : sub.get_options())
    if (o->get_positional()) {
      const int n = o->get_items_expected_max();
      positional_room = (n <= 0 || n >= (1 << 20)) ? static_cast<size_t>(-1) / 2 : positional_room + static_cast<size_t>(n);
      positional_names.push_back(o->get_name(true));
    }
  std::vector<std::string> problems;
  size_t positionals = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;  // everything after it is positional for CLI11
    if (looks_like_flag(a)) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(0, eq);
      const bool is_long = name.rfind("--", 0) == 0;
      const CLI::Option* o = is_long ? find_long(sub, name.substr(2)) : find_short(sub, name.substr(1));
      if (o == nullptr && (name == "--help" || name == "-h")) continue;
      if (o != nullptr) {
        if (eq != std::string::npos || o->get_expected_max() == 0) continue;  // a flag, or --opt=value
        // Its value(s): one, or for a list option every following non-flag argument.
        const int n = o->get_items_expected_max();
        if (n > 1) {
          while (i + 1 < args.size() && !looks_like_flag(args[i + 1])) ++i;
        } else if (i + 1 < args.size()) {
          ++i;
        }
        continue;
      }
      std::string line = "  " + name + ": unknown flag";
      const std::string near = nearest_flag(sub, name);
      if (!near.empty()) line += "; did you mean " + near + "?";
      problems.push_back(line);
      // Its value, if one follows (--lrr 0.5): part of the unknown flag, not another problem.
      if (eq == std::string::npos && i + 1 < args.size() && !looks_like_flag(args[i + 1]) && !args[i + 1].empty() &&
          positionals >= positional_room)
        ++i;
      continue;
    }
    // bash makes " --user-dir" of "pt \ --user-dir": a "\ " inside a line, from a command copied
    // without its line breaks, as seed 004 prints its commands ("fairseq-train \ --user-dir ...").
    const size_t first = a.find_first_not_of(' ');
    if (!a.empty() && a[0] == ' ' && (first == std::string::npos || a[first] == '-')) {
      problems.push_back("  " + quoted(a) + ": a space before " + (first == std::string::npos ? "nothing" : "the flag") +
                         " (a '\\ ' inside a line? put each '\\' at the end of its line, or delete it)");
      continue;
    }
    if (a.find_first_not_of(" \t\n") == std::string::npos) {
      problems.push_back("  " + quoted(a) + ": a blank argument (an empty variable, or a stray quote or space?)");
      continue;
    }
    if (positionals < positional_room) {
      ++positionals;
      continue;
    }
    std::string line = "  " + quoted(a) + ": unexpected argument";
    if (!positional_names.empty()) {
      line += " (" + sub.get_name() + " takes " + std::to_string(positional_room) + " positional argument" +
              (positional_room == 1 ? "" : "s") + ": " + positional_names.front() + ")";
    } else {
      line += " (" + sub.get_name() + " takes no positional argument)";
    }
    problems.push_back(line);
  }
  if (problems.empty()) return std::nullopt;
  std::string msg = sub.get_name() + ": " + std::to_string(problems.size()) + " unknown or unexpected argument" +
                    (problems.size() == 1 ? "" : "s") + ", in command-line order:\n";
  for (const std::string& p : problems) msg += p + "\n";
  msg += "hint: `stretch " + sub.get_name() + " --help` lists the flags; a fairseq flag stretch does not know is "
         "never ignored silently";
  return msg;
}

}  // namespace stretch::cli
