// cli/cmd_sweep.cpp — `stretch sweep`: placeholder until issue 7: evaluation lands.
#include "cli/command.h"

namespace stretch::cli {
void add_sweep(CLI::App& sub, Runner& run) { add_not_built(sub, run, "issue 7: evaluation"); }
}  // namespace stretch::cli
