// cli/cmd_preprocess.cpp — `stretch preprocess`: placeholder until issue 4: data layer lands.
#include "cli/command.h"

namespace stretch::cli {
void add_preprocess(CLI::App& sub, Runner& run) { add_not_built(sub, run, "issue 4: data layer"); }
}  // namespace stretch::cli
