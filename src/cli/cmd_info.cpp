// cli/cmd_info.cpp — `stretch info`: what this build is (version, threads, GEMM library, data dir).
#include <oneapi/dnnl/dnnl.h>

#include <iostream>

#include "cli/command.h"
#include "core/threads.h"
#include "stretch/version.h"

namespace stretch::cli {
void add_info(CLI::App& sub, Runner& run) {
  auto opts = std::make_shared<CommonOptions>();
  add_common_options(sub, *opts);
  run = [opts] {
    apply_common_options(*opts);
    const dnnl_version_t* v = dnnl_version();
    std::cout << "stretch " << STRETCH_VERSION << "\n"
              << "threads: " << num_threads() << "\n"
              << "gemm: oneDNN " << v->major << "." << v->minor << "." << v->patch << " (" << v->cpu_runtime
              << " runtime)\n"
              << "data dir: " << STRETCH_DATA_DIR << "\n";
    return 0;
  };
}
}  // namespace stretch::cli
