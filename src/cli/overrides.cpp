#include "cli/overrides.h"

#include <cctype>

#include "core/error.h"

namespace stretch::cli {
namespace {
// s as a JSON string. Bytes that are not UTF-8 make nlohmann throw a type_error, which used to
// escape as "a bug in stretch" (found by tests/fuzz/fuzz_model_overrides).
std::string quoted(const std::string& s, const std::string& text) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    fail_usage("--model-overrides: the string '" + s + "' is not valid UTF-8 (in " + text + ")",
               "write keys and values in UTF-8 (or ASCII)");
  }
}
}  // namespace

nlohmann::json parse_model_overrides(const std::string& text) {
  std::string j;
  size_t i = 0;
  const size_t n = text.size();
  auto word_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-' || ch == '+'; };
  while (i < n) {
    char ch = text[i];
    if (ch == '\'' || ch == '"') {  // a quoted string: re-emit with double quotes
      const char q = ch;
      std::string s;
      ++i;
      while (i < n && text[i] != q) {
        if (text[i] == '\\' && i + 1 < n) s += text[i++];
        s += text[i++];
      }
      if (i >= n) fail_usage("--model-overrides: unterminated string in " + text);
      ++i;
      j += quoted(s, text);
    } else if (word_char(ch)) {
      std::string w;
      while (i < n && word_char(text[i])) w += text[i++];
      if (w == "True") j += "true";
      else if (w == "False") j += "false";
      else if (w == "None") j += "null";
      else if (std::isdigit(static_cast<unsigned char>(w[0])) || w[0] == '-' || w[0] == '+' || w[0] == '.') j += w;
      else j += quoted(w, text);  // a bare identifier (shell ate the quotes)
    } else {
      j += ch;
      ++i;
    }
  }
  if (j.find_first_not_of(" \t\n") == std::string::npos) return nlohmann::json::object();
  try {
    nlohmann::json out = nlohmann::json::parse(j);
    if (!out.is_object()) fail_usage("--model-overrides must be a dict, got: " + text);
    return out;
  } catch (const nlohmann::json::exception& e) {
    fail_usage("--model-overrides: cannot parse " + text + " (" + e.what() + ")",
               "write a Python dict literal, e.g. \"{'tokens_per_sample': 1024}\"");
  }
}

namespace {
// "key:value" as bash leaves one item of {key:value,...}: key an identifier, value a number, a
// boolean or a bare word.
bool key_value_word(const std::string& w) {
  const size_t colon = w.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == w.size()) return false;
  auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  auto value_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-';
  };
  if (!letter(w[0])) return false;
  for (size_t i = 1; i < colon; ++i)
    if (!letter(w[i]) && !std::isdigit(static_cast<unsigned char>(w[i]))) return false;
  for (size_t i = colon + 1; i < w.size(); ++i)
    if (!value_char(w[i])) return false;
  return true;
}
}  // namespace

void join_brace_expanded_overrides(std::vector<std::string>& args) {
  static const std::string flag = "--model-overrides";
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string first;
    size_t next = i + 1;
    if (args[i] == flag && next < args.size() && key_value_word(args[next])) {
      first = args[next++];
    } else if (args[i].rfind(flag + "=", 0) == 0 && key_value_word(args[i].substr(flag.size() + 1))) {
      first = args[i].substr(flag.size() + 1);
    } else {
      out.push_back(args[i]);
      continue;
    }
    std::string joined = "{" + first;
    while (next < args.size() && key_value_word(args[next])) joined += "," + args[next++];
    out.push_back(flag);
    out.push_back(joined + "}");
    i = next - 1;
  }
  args = std::move(out);
}

}  // namespace stretch::cli
