// cli/config_file.cpp — the JSON --config reader (contract in config_file.h).
#include "cli/config_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace stretch::cli {
namespace {

struct ConfigSetting {
  CLI::App* sub;
  std::shared_ptr<std::string> path;
  std::set<std::string> derived;
};

std::vector<ConfigSetting>& registry() {
  static std::vector<ConfigSetting> r;
  return r;
}

struct Item {
  std::string key;                  // as written (underscores)
  std::vector<std::string> values;  // one, or several for a list
};

std::vector<std::string> values_of(const nlohmann::json& v) {
  if (v.is_boolean()) return {v.get<bool>() ? "true" : "false"};
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    return out;
  }
  return {v.is_string() ? v.get<std::string>() : v.dump()};
}

void flatten(const std::string& path, const nlohmann::json& j, const std::string& group, const ConfigSetting& s,
             std::map<std::string, Item>& out, std::vector<std::string>& order) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_object()) {
      flatten(path, it.value(), it.key(), s, out, order);
      continue;
    }
    if (it.value().is_null()) continue;
    std::string key = it.key() == "_name" ? group : it.key();  // {"optimizer": {"_name": "nag"}}: --optimizer nag
    if (key.empty()) continue;
    std::replace(key.begin(), key.end(), '-', '_');
    if (s.derived.count(key)) {
      log_once(LogLevel::Info, "--config " + path + ": '" + key + "' is derived by the run (e.g. from dict.txt); ignored");
      continue;
    }
    Item item{key, values_of(it.value())};
    if (auto found = out.find(key); found != out.end()) {
      if (found->second.values != item.values)
        fail_usage("--config " + path + ": '" + key + "' is given twice with different values",
                   "keep one of them (a key may appear in several groups only with one value)");
      continue;
    }
    out.emplace(key, item);
    order.push_back(key);
  }
}

}  // namespace

void enable_json_config(CLI::App& sub, std::set<std::string> derived_keys) {
  auto path = std::make_shared<std::string>();
  sub.add_option("--config", *path, "read options from a JSON file (keys are flag names; --dump-config output works)");
  registry().push_back({&sub, path, std::move(derived_keys)});
}

std::optional<std::vector<std::string>> json_config_arguments(CLI::App& app, const std::vector<std::string>& args) {
  for (const ConfigSetting& s : registry()) {
    if (!s.sub->parsed() || s.path->empty()) continue;
    const std::string& path = *s.path;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))  // reading a directory throws std::ios_failure
      fail_usage("--config " + path + ": is a directory, not a file", "give the path of a JSON config file");
    std::ifstream in(path);
    if (!in) fail_usage("--config " + path + ": cannot open the file", "give the path of a JSON config file");
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception& e) {
      fail_usage("--config " + path + ": not valid JSON: " + e.what(), "write a JSON object of flag names");
    } catch (const std::ios_base::failure& e) {
      fail_usage("--config " + path + ": cannot read the file: " + e.what(), "give the path of a JSON config file");
    }
    if (!j.is_object()) fail_usage("--config " + path + ": the file must hold a JSON object of flag names");
    std::map<std::string, Item> items;
    std::vector<std::string> order;
    flatten(path, j, "", s, items, order);
    std::vector<std::string> out = args;
    for (const std::string& key : order) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      CLI::Option* opt = s.sub->get_option_no_throw(flag);
      if (!opt || key == "config")
        fail_usage("--config " + path + ": unknown key '" + key + "' (no flag " + flag + ")",
                   "keys are this subcommand's flag names, e.g. \"max_tokens\" or \"max-tokens\"; see --help");
      if (opt->count() > 0) continue;  // the command line wins
      const Item& item = items.at(key);
      if (item.values.empty())
        fail_usage("--config " + path + ": '" + key + "' is an empty list",
                   "give it a value (or a list of values), or leave the key out");
      if (opt->get_expected_min() == 0) {  // a flag: "--flag=true" or "--flag=false"
        if (item.values.size() > 1)
          fail_usage("--config " + path + ": '" + key + "' is a flag and takes one value, not a list of " +
                         std::to_string(item.values.size()),
                     "write \"" + key + "\": true or \"" + key + "\": false");
        out.push_back(flag + "=" + item.values.front());
        continue;
      }
      out.push_back(flag);
      if (opt->get_expected_max() == 1 && item.values.size() > 1) {  // a list flag of one token: "0.25,0.1"
        std::string joined;
        for (const auto& v : item.values) joined += (joined.empty() ? "" : ",") + v;
        out.push_back(joined);
      } else {
        out.insert(out.end(), item.values.begin(), item.values.end());
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace stretch::cli
