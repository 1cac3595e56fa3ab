// cli/cmd_train.cpp — `stretch train`: placeholder until issue 5: training lands.
#include "cli/command.h"

namespace stretch::cli {
void add_train(CLI::App& sub, Runner& run) { add_not_built(sub, run, "issue 5: training"); }
}  // namespace stretch::cli
