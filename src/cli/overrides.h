// cli/overrides.h — fairseq's --model-overrides: a Python dict literal such as
// "{'max_tokens':1024, 'tokens_per_sample':1024, 'same_length':True}" (or JSON, or the
// shell-stripped form {mem_len:2100,same_length:True}) turned into a JSON object.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace stretch::cli {
// Empty text gives {}. A malformed literal is a usage error naming --model-overrides.
nlohmann::json parse_model_overrides(const std::string& text);
}  // namespace stretch::cli
