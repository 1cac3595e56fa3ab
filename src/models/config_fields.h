// models/config_fields.h — one declaration per config field, from which everything else comes.
// Contract: a family's config is a plain struct C; its table is a list of Field<C>, each with the
// fairseq key (JSON, --model-overrides, checkpoints), the command-line flag (nullptr: none), the
// help text, a kind (int, float, bool, choice), the choices of a choice field, and its Role:
//   Structural  changes a tensor or the function computed: a resumed run and the checkpoint
//               must agree on it (an optional `applies` predicate narrows it, e.g. rope_base
//               only when pos = rope);
//   Free        e.g. dropout, arch: may differ on resume;
//   Evaluation  e.g. alibi_slope_scale: an evaluation-time option, not part of the weights.
// A field without a flag (vocab_size, padding_idx: from dict.txt) is set by the program only.
// to_json / apply / structural_differences are generic over a table; a value of the wrong type is
// a usage error naming the key. Families: models/<family>/config.cpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace stretch::models {

enum class FieldKind : uint8_t { Int, Float, Bool, Choice, Text };

// One item of a comma-separated integer list key (cutoffs, decoder_layers_to_keep): the whole of
// `item` as a base-10 integer, nullopt when it is empty, not a number or followed by anything else.
inline std::optional<int64_t> parse_integer(const std::string& item) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(item, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (item.empty() || used != item.size()) return std::nullopt;
  return v;
}
enum class FieldRole : uint8_t { Structural, Free, Evaluation };

// What a field is, without the struct it lives in (the CLI registers flags from these).
struct FieldSpec {
  std::string key{};                 // fairseq name: decoder_embed_dim
  std::string flag{};                // --decoder-embed-dim (empty: no flag); ","-separated aliases
  std::string help{};
  FieldKind kind = FieldKind::Int;
  FieldRole role = FieldRole::Structural;
  std::vector<std::string> choices{};  // Choice: the accepted values
};

template <class C>
struct Field {
  FieldSpec spec;
  std::function<nlohmann::json(const C&)> get;
  std::function<void(C&, const nlohmann::json&)> set;  // throws nlohmann::json::exception on a wrong type
  std::function<bool(const C&)> applies;               // Structural only when this holds (empty: always)
};

namespace fields {

// Booleans: fairseq writes true/false; a Python literal in --model-overrides may give 0/1.
inline bool json_bool(const nlohmann::json& v) { return v.is_boolean() ? v.get<bool>() : v.get<int>() != 0; }

template <class C, class T>
Field<C> number(T C::*member, FieldSpec spec) {
  spec.kind = std::is_integral_v<T> ? FieldKind::Int : FieldKind::Float;
  const std::string key = spec.key;
  return {std::move(spec), [member](const C& c) { return nlohmann::json(c.*member); },
          [member, key](C& c, const nlohmann::json& v) {
            if (!v.is_number()) throw nlohmann::json::type_error::create(302, "'" + key + "' must be a number", &v);
            if constexpr (std::is_integral_v<T>) {
              if (!v.is_number_integer() && v.get<double>() != std::floor(v.get<double>()))
                throw nlohmann::json::type_error::create(302, "'" + key + "' must be an integer", &v);
            }
            c.*member = v.get<T>();
          },
          {}};
}

template <class C>
Field<C> boolean(bool C::*member, FieldSpec spec) {
  spec.kind = FieldKind::Bool;
  return {std::move(spec), [member](const C& c) { return nlohmann::json(c.*member); },
          [member](C& c, const nlohmann::json& v) { c.*member = json_bool(v); }, {}};
}

template <class C>
Field<C> text(std::string C::*member, FieldSpec spec) {
  spec.kind = FieldKind::Text;
  return {std::move(spec), [member](const C& c) { return nlohmann::json(c.*member); },
          [member](C& c, const nlohmann::json& v) { c.*member = v.get<std::string>(); }, {}};
}

// An enum member with name() / parse() functions (parse throws a usage error naming the value).
template <class C, class E>
Field<C> choice(E C::*member, const char* (*name)(E), E (*parse)(const std::string&), std::vector<E> values,
                FieldSpec spec) {
  spec.kind = FieldKind::Choice;
  for (E e : values) spec.choices.push_back(name(e));
  return {std::move(spec), [member, name](const C& c) { return nlohmann::json(name(c.*member)); },
          [member, parse](C& c, const nlohmann::json& v) { c.*member = parse(v.get<std::string>()); }, {}};
}

template <class C>
Field<C> when(Field<C> f, std::function<bool(const C&)> applies) {
  f.applies = std::move(applies);
  return f;
}

template <class C>
nlohmann::json to_json(const std::vector<Field<C>>& table, const C& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : table) j[f.spec.key] = f.get(c);
  return j;
}

template <class C>
const Field<C>* find(const std::vector<Field<C>>& table, const std::string& key) {
  for (const auto& f : table)
    if (f.spec.key == key) return &f;
  return nullptr;
}

// Sets the keys of j that the table has; returns the keys it does not have (the caller decides).
// `source` names where the values came from in errors (--model-overrides, a checkpoint's path).
template <class C>
std::vector<std::string> apply(const std::vector<Field<C>>& table, C& c, const nlohmann::json& j,
                               const std::string& source) {
  std::vector<std::string> unknown;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const Field<C>* f = find(table, it.key());
    if (!f) {
      unknown.push_back(it.key());
      continue;
    }
    try {
      f->set(c, it.value());
    } catch (const nlohmann::json::exception&) {
      fail_usage(source + ": model config key '" + it.key() + "' has the value " + it.value().dump() +
                     ", which is not " +
                     (f->spec.kind == FieldKind::Int     ? "an integer"
                      : f->spec.kind == FieldKind::Float ? "a number"
                      : f->spec.kind == FieldKind::Bool  ? "a boolean"
                                                         : "a string"),
                 "check the value's type in the config or --model-overrides");
    }
  }
  return unknown;
}

// "key saved (this run: wanted), ..." over the structural fields that apply to `wanted`.
template <class C>
std::string structural_differences(const std::vector<Field<C>>& table, const C& saved, const C& wanted) {
  std::string diffs;
  for (const auto& f : table) {
    if (f.spec.role != FieldRole::Structural || (f.applies && !f.applies(wanted))) continue;
    const nlohmann::json a = f.get(saved), b = f.get(wanted);
    if (a != b) diffs += (diffs.empty() ? "" : ", ") + f.spec.key + " " + a.dump() + " (this run: " + b.dump() + ")";
  }
  return diffs;
}

template <class C>
std::vector<FieldSpec> specs(const std::vector<Field<C>>& table) {
  std::vector<FieldSpec> out;
  for (const auto& f : table) out.push_back(f.spec);
  return out;
}

}  // namespace fields
}  // namespace stretch::models
