// cli/overrides.h — fairseq's --model-overrides: a Python dict literal such as
// "{'max_tokens':1024, 'tokens_per_sample':1024, 'same_length':True}" (or JSON, or the
// shell-stripped form {mem_len:2100,same_length:True}) turned into a JSON object.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace stretch::cli {
// Empty text gives {}. A malformed literal is a usage error naming --model-overrides.
nlohmann::json parse_model_overrides(const std::string& text);

// bash's brace expansion of an unquoted --model-overrides {mem_len:2100,clamp_len:820,same_length:True}
// (seed 004's Transformer-XL evaluation, whose quotes were lost) passes three words:
// `--model-overrides mem_len:2100 clamp_len:820 same_length:True`. When the value after
// --model-overrides is such a key:value word, it and the key:value words right after it become one
// argument, "{mem_len:2100,clamp_len:820,same_length:True}". A word joins only if its key is an
// identifier and its value holds letters, digits and . _ + - (no path, no space, no quote), so a
// data directory after the flag stays positional.
void join_brace_expanded_overrides(std::vector<std::string>& args);
}  // namespace stretch::cli
