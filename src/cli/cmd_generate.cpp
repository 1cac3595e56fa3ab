// cli/cmd_generate.cpp — `stretch generate`: placeholder until issue 7: generation lands.
#include "cli/command.h"

namespace stretch::cli {
void add_generate(CLI::App& sub, Runner& run) { add_not_built(sub, run, "issue 7: generation"); }
}  // namespace stretch::cli
