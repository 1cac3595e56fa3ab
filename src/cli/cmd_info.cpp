// cli/cmd_info.cpp — `stretch info [PATH]`: without PATH, what this build is (version, threads,
// GEMM library, data dir); with a checkpoint, its config, parameter count and training state;
// with a data-bin directory, its dictionary and splits.
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/bf16_speed.h"
#include "cli/command.h"
#include "core/peak_flops.h"
#include "core/threads.h"
#include "ops/attention_precision.h"
#include "ops/linear.h"
#include "data/indexed_dataset.h"
#include "stretch/version.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/lm_data.h"

namespace stretch::cli {
namespace {

// One thread's FMA rates, measured now (core/peak_flops.h, ~0.1 s per kernel): fp32 at the faster
// vector width, and bf16 `vdpbf16ps` where the CPU has avx512_bf16. Whether --bf16 can pay off
// depends on their ratio, which is not the same on every CPU: about 2× on Zen 4 and Zen 5, 0.5× on
// an Intel Xeon whose AMX is not exposed (docs/BENCHMARKS.md). Where the CPU has AMX (and Linux
// grants the tiles), the AMX tiles' bf16 rate too: oneDNN's bf16 products run there (~16x fp32 on
// an Intel Xeon model 167), so the dot product's rate then does not decide --bf16's speed.
Peak describe_peak() {
  const CpuInfo cpu = cpu_info();
  const Peak p = measure_peak(cpu, /*threads=*/1, /*seconds=*/0.1);
  char line[256];
  std::snprintf(line, sizeof line, "peak, 1 thread, measured now: fp32 FMA %.1f GFLOP/s (%s)", p.fp32_1(),
                p.fp32_isa());
  std::cout << line;
  if (p.bf16_1 <= 0) {
    std::cout << ", bf16 dot product: none (no avx512_bf16)\n";
    return p;
  }
  const double ratio = p.bf16_1 / p.fp32_1();
  std::snprintf(line, sizeof line, ", bf16 dot product %.1f GFLOP/s = %.2fx fp32", p.bf16_1, ratio);
  std::cout << line;
  if (p.amx_1 > 0) {  // oneDNN's bf16 products run on the tiles, whatever the dot product's rate
    std::snprintf(line, sizeof line, ", bf16 AMX tiles %.1f GFLOP/s = %.2fx fp32", p.amx_1, p.amx_1 / p.fp32_1());
    std::cout << line << "\n";
    return p;
  }
  std::cout << (ratio < 1 ? " (--bf16's products are slower than fp32's on this CPU)" : "") << "\n";
  return p;
}

// What --bf16 would run here: cli/bf16_speed.h's choice on the rates just printed
// (STRETCH_BF16_PRODUCTS included).
void describe_bf16_products(const Peak& p) {
  if (!ops::bf16_matmul_supported()) return;
  const char* env = std::getenv("STRETCH_BF16_PRODUCTS");
  const ops::Bf16MatmulKind kind = ops::bf16_matmul_kind();
  const bool measured = bf16_rates_decide(kind);
  const Bf16Speed speed{kind, measured ? p.fp32_1() : 0, measured ? p.bf16_1 : 0, ops::attention_bf16_amx()};
  const Bf16Choice c = choose_bf16_products(speed, env, "--bf16");
  std::cout << "--bf16 products: "
            << (c.products == ops::Bf16Products::Native && speed.attention_on_amx
                    ? "native (oneDNN's bf16 kernels, bf16 attention tiles on AMX)"
                : c.products == ops::Bf16Products::Native  ? "native (oneDNN's bf16 kernels, bf16 attention tiles)"
                : c.products == ops::Bf16Products::Fp32Fma ? "fp32 FMAs on bf16-rounded operands"
                                                           : "native (oneDNN's bf16 kernels on AMX), fp32 attention")
            << (env && *env ? std::string(" (STRETCH_BF16_PRODUCTS=") + env + ")" : std::string()) << "\n";
}

void describe_build() {
  const dnnl_version_t* v = dnnl_version();
  std::cout << "stretch " << STRETCH_VERSION << "\n"
            << "threads: " << num_threads() << "\n"
            << "gemm: oneDNN " << v->major << "." << v->minor << "." << v->patch << "; plain fp32 products: "
            << ops::gemm_library_name(ops::gemm_library()) << " (" << ops::openblas_description() << ")\n"
            << "linear backward with 2 threads: " << ops::linear_backward_schedule_name(ops::linear_backward_schedule())
            << "\n"
            << "bf16 matmul: " << (ops::bf16_matmul_supported() ? "supported" : "not supported") << " ("
            << ops::cpu_isa_summary() << ")\n"
            << "data dir: " << STRETCH_DATA_DIR << "\n";
  describe_bf16_products(describe_peak());
}

void describe_checkpoint(const std::string& path) {
  const models::ModelFile m = models::read_model_file(path);
  int64_t params = 0, optimizer_values = 0, ema_values = 0, segment_values = 0;
  for (const auto& [name, t] : m.file.tensors)
    (name.rfind("optimizer.", 0) == 0 ? optimizer_values
     : name.rfind("ema.", 0) == 0     ? ema_values
     : name.rfind("segment.", 0) == 0 ? segment_values
                                      : params) += t.numel();
  std::cout << "checkpoint: " << path << "\n"
            << "model: " << m.model.dump() << "\n"
            << "parameters: " << params << ", optimizer state values: " << optimizer_values << "\n"
            << "dictionary hash: " << m.dict_hash << (m.dictionary.empty() ? " (dictionary not stored)" : "") << "\n";
  if (ema_values > 0) std::cout << "EMA values: " << ema_values << " (--store-ema's moving average of the weights)\n";
  if (segment_values > 0) std::cout << "training memory values: " << segment_values << "\n";
  if (auto it = m.file.metadata.find("optimizer"); it != m.file.metadata.end()) {
    // The optimizer's name and its hyperparameters as saved (optim/optimizer.h state_dict()).
    const nlohmann::json o = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (o.is_object() && o.contains("optimizer") && o["optimizer"].is_string())
      std::cout << "optimizer: " << o["optimizer"].get<std::string>() << " "
                << (o.contains("config") ? o["config"].dump() : std::string("{}")) << "\n";
  }
  if (m.format == models::kCheckpointFormat)
    std::cout << "train state: " << train::read_checkpoint(path).state.to_json().dump() << "\n";
  else
    std::cout << "model file (no training state)\n";
}

void describe_data(const std::string& dir) {
  train::LmData d = train::open_lm_data(dir);
  std::cout << "data: " << dir << "\n"
            << "dictionary: " << d.dict_path << " (" << d.vocab_size << " symbols" << (d.byte_level ? ", byte level" : "")
            << ", " << d.dict_hash << ")\n";
  for (const char* split : {"train", "valid", "test"}) {
    const std::string prefix = (std::filesystem::path(dir) / split).string();
    if (!data::IndexedDataset::exists(prefix)) continue;
    auto ds = data::IndexedDataset::open(prefix);
    std::cout << split << ": " << ds->num_items() << " lines, " << ds->total_tokens() << " tokens\n";
  }
}

}  // namespace

void add_info(CLI::App& sub, Runner& run) {
  auto opts = std::make_shared<CommonOptions>();
  auto path = std::make_shared<std::string>();
  add_common_options(sub, *opts);
  auto archs = std::make_shared<bool>(false);
  sub.add_option("path", *path, "a checkpoint or a data-bin directory (nothing: this build)");
  sub.add_flag("--archs", *archs, "list the --arch names, their families and presets");
  run = [opts, path, archs] {
    apply_common_options(*opts);
    if (*archs) std::cout << models::arch_table();
    else if (path->empty()) describe_build();
    else if (std::filesystem::is_directory(*path)) describe_data(*path);
    else describe_checkpoint(*path);
    return 0;
  };
}

}  // namespace stretch::cli
