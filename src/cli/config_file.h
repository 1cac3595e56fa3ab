// cli/config_file.h — `--config FILE` for every subcommand: a JSON object whose keys are flag
// names without dashes (underscores or dashes both accepted), e.g. {"lr": 1.0, "max_update": 100}.
// Nested objects (the checkpoint's config groups) are flattened. Unknown keys are errors,
// exactly like unknown flags. Implemented as a CLI11 config formatter (CLI11 owns the parsing).
#pragma once
#include <CLI/CLI.hpp>

namespace stretch::cli {
void enable_json_config(CLI::App& sub);
}  // namespace stretch::cli
