#include "cli/config_file.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace stretch::cli {
namespace {

class ConfigJson : public CLI::Config {
 public:
  std::string to_config(const CLI::App* app, bool default_also, bool, std::string) const override {
    nlohmann::json j;
    for (const CLI::Option* opt : app->get_options({})) {
      if (opt->get_lnames().empty() || !opt->get_configurable()) continue;
      const std::string name = opt->get_lnames()[0];
      if (opt->count() > 0) {
        auto res = opt->results();
        j[name] = res.size() == 1 ? nlohmann::json(res[0]) : nlohmann::json(res);
      } else if (default_also && !opt->get_default_str().empty()) {
        j[name] = opt->get_default_str();
      }
    }
    return j.dump(2) + "\n";
  }

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    nlohmann::json j;
    try {
      input >> j;
    } catch (const nlohmann::json::exception& e) {
      throw CLI::FileError(std::string("--config: not valid JSON: ") + e.what());
    }
    std::vector<CLI::ConfigItem> items;
    flatten(j, items);
    return items;
  }

 private:
  static void flatten(const nlohmann::json& j, std::vector<CLI::ConfigItem>& items) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_object()) {
        flatten(it.value(), items);
        continue;
      }
      if (it.key() == "_name") continue;
      CLI::ConfigItem item;
      item.name = it.key();
      std::replace(item.name.begin(), item.name.end(), '-', '_');
      const auto& v = it.value();
      if (v.is_boolean()) {
        item.inputs = {v.get<bool>() ? "true" : "false"};
      } else if (v.is_array()) {
        for (const auto& e : v) item.inputs.push_back(e.is_string() ? e.get<std::string>() : e.dump());
      } else {
        item.inputs = {v.is_string() ? v.get<std::string>() : v.dump()};
      }
      items.push_back(item);
    }
  }
};

}  // namespace

void enable_json_config(CLI::App& sub) {
  sub.config_formatter(std::make_shared<ConfigJson>());
  sub.set_config("--config", "", "read options from a JSON file (keys are flag names)");
  sub.allow_config_extras(CLI::config_extras_mode::error);
}

}  // namespace stretch::cli
