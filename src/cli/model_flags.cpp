// cli/model_flags.cpp — see model_flags.h.
#include "cli/model_flags.h"

#include <charconv>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "models/registry.h"

namespace stretch::cli {

std::set<std::string> derived_model_keys() {
  std::set<std::string> keys;
  for (const auto& f : models::model_fields())
    if (f.flag.empty() && f.key != "arch" && f.key != "tokens_per_sample") keys.insert(f.key);
  return keys;
}

namespace {
std::string first_name(const std::string& flag) { return flag.substr(0, flag.find(',')); }

CLI::Validator integer_value(const std::string& flag) {
  return CLI::Validator(
      [name = first_name(flag)](std::string& s) -> std::string {
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size())
          return name + " " + s + ": not an integer in [-2^63, 2^63)";
        return {};
      },
      "INT");
}

CLI::Validator float_value(const std::string& flag) {
  return CLI::Validator(
      [name = first_name(flag)](std::string& s) -> std::string {
        size_t used = 0;
        try {
          (void)std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size()) return name + " " + s + ": not a number";
        return {};
      },
      "FLOAT");
}
}  // namespace

void add_model_flags(CLI::App& sub, ModelFlags& f) {
  sub.add_option("--arch,-a", f.arch, "model architecture (`--arch help` lists them)")->group("Model")->capture_default_str();
  // One option per field with a flag; the values are read back only for the flags given.
  struct Bound {
    models::FieldSpec spec;
    CLI::Option* option = nullptr;
    std::string text{};
    bool on = false;
  };
  auto bound = std::make_shared<std::vector<Bound>>();
  for (const auto& spec : models::model_fields())
    if (!spec.flag.empty()) bound->push_back({spec});
  for (auto& b : *bound) {
    const std::string help = b.spec.help.empty() ? b.spec.key : b.spec.help;
    if (b.spec.kind == models::FieldKind::Bool) {
      b.option = sub.add_flag(b.spec.flag, b.on, help);
    } else {
      b.option = sub.add_option(b.spec.flag, b.text, help);
      if (b.spec.kind == models::FieldKind::Choice) b.option->check(CLI::IsMember(b.spec.choices));
      if (b.spec.kind == models::FieldKind::Int) b.option->check(integer_value(b.spec.flag));
      if (b.spec.kind == models::FieldKind::Float) b.option->check(float_value(b.spec.flag));
    }
    b.option->group("Model");
  }
  sub.add_flag("--post-norm", f.post_norm, "post-norm blocks (stretch's switch; fairseq's transformer_lm forces pre-norm)")
      ->group("Model");
  sub.add_flag("--decoder-learned-pos", f.decoder_learned_pos, "fairseq's spelling of --pos learned")->group("Model");
  sub.add_flag("--no-token-positional-embeddings", f.no_token_positional_embeddings,
               "fairseq's spelling of --pos none")
      ->group("Model");
  sub.callback([&f, bound] {
    f.given = nlohmann::json::object();
    for (const auto& b : *bound) {
      if (b.option->count() == 0) continue;
      const std::string& k = b.spec.key;
      switch (b.spec.kind) {
        case models::FieldKind::Bool: f.given[k] = b.on; break;
        case models::FieldKind::Int: f.given[k] = std::stoll(b.text); break;
        case models::FieldKind::Float: f.given[k] = std::stod(b.text); break;
        case models::FieldKind::Choice:
        case models::FieldKind::Text: f.given[k] = b.text; break;
      }
    }
  });
}

void join_boolean_flag_values(std::vector<std::string>& args) {
  std::set<std::string> flags;
  for (const auto& spec : models::model_fields())
    if (spec.kind == models::FieldKind::Bool && !spec.flag.empty()) {
      std::string names = spec.flag;  // "--a,--b"
      for (size_t start = 0; start <= names.size();) {
        const size_t comma = names.find(',', start);
        flags.insert(names.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    }
  static const std::set<std::string> values = {"True", "False", "true", "false", "1", "0"};
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (flags.count(args[i]) && i + 1 < args.size() && values.count(args[i + 1])) {
      const std::string& v = args[i + 1];
      out.push_back(args[i] + "=" + (v == "True" || v == "true" || v == "1" ? "true" : "false"));
      ++i;
    } else {
      out.push_back(args[i]);
    }
  }
  args = std::move(out);
}

nlohmann::json ModelFlags::resolve(int64_t tokens_per_sample) const {
  nlohmann::json g = given;
  if (post_norm) g["decoder_normalize_before"] = false;
  // fairseq's spellings of --pos: a contradiction is a usage error naming both flags.
  const std::pair<bool, const char*> spellings[] = {{decoder_learned_pos, "learned"},
                                                     {no_token_positional_embeddings, "none"}};
  std::string from;
  for (const auto& [on, pos] : spellings) {
    if (!on) continue;
    const std::string flag = std::string(pos) == "learned" ? "--decoder-learned-pos" : "--no-token-positional-embeddings";
    if (g.contains("pos") && g["pos"] != pos)
      fail_usage(flag + " means --pos " + pos + ", but " + (from.empty() ? "--pos " + g["pos"].get<std::string>() : from) +
                     " is given too",
                 "give one position method");
    g["pos"] = pos;
    from = flag;
  }
  return models::resolve_config(arch, g, tokens_per_sample);
}

}  // namespace stretch::cli
