// cli/cmd_info.cpp — `stretch info [CKPT]`: what this build is (version, threads, GEMM library,
// data dir); given a checkpoint, also what it holds: the model config (fairseq names), the
// dictionary hash, where training stood (train_state) and the tensor and parameter counts.
#include <oneapi/dnnl/dnnl.h>

#include <iostream>

#include "cli/command.h"
#include "core/threads.h"
#include "stretch/version.h"
#include "train/checkpoint.h"

namespace stretch::cli {
void add_info(CLI::App& sub, Runner& run) {
  auto opts = std::make_shared<CommonOptions>();
  auto path = std::make_shared<std::string>();
  add_common_options(sub, *opts);
  sub.add_option("checkpoint", *path, "a checkpoint written by `stretch train` (optional)");
  run = [opts, path] {
    apply_common_options(*opts);
    const dnnl_version_t* v = dnnl_version();
    std::cout << "stretch " << STRETCH_VERSION << "\n"
              << "threads: " << num_threads() << "\n"
              << "gemm: oneDNN " << v->major << "." << v->minor << "." << v->patch << " (" << v->cpu_runtime
              << " runtime)\n"
              << "data dir: " << STRETCH_DATA_DIR << "\n";
    if (path->empty()) return 0;
    const train::CheckpointContents ck = train::read_checkpoint(*path);
    int64_t model_tensors = 0, model_params = 0, optimizer_tensors = 0;
    for (const auto& [name, t] : ck.file.tensors) {
      if (name.rfind("optimizer.", 0) == 0) {
        ++optimizer_tensors;
      } else {
        ++model_tensors;
        model_params += t.numel();
      }
    }
    std::cout << "checkpoint: " << *path << "\n"
              << "model: " << ck.model.to_json().dump() << "\n"
              << "dict_hash: " << ck.dict_hash << "\n"
              << "train_state: " << ck.state.to_json().dump() << "\n"
              << "tensors: " << model_tensors << " model (" << model_params << " parameters), " << optimizer_tensors
              << " optimizer\n";
    return 0;
  };
}
}  // namespace stretch::cli
