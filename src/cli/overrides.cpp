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

}  // namespace stretch::cli
