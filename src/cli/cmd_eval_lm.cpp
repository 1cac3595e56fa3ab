// cli/cmd_eval_lm.cpp — `stretch eval-lm`: placeholder until issue 7: evaluation lands.
#include "cli/command.h"

namespace stretch::cli {
void add_eval_lm(CLI::App& sub, Runner& run) { add_not_built(sub, run, "issue 7: evaluation"); }
}  // namespace stretch::cli
