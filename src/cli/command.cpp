#include "cli/command.h"

#include <charconv>
#include <iostream>
#include <memory>

#include "cli/bf16_speed.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threads.h"
#include "ops/linear.h"

namespace stretch::cli {

void add_common_options(CLI::App& sub, CommonOptions& opts) {
  sub.add_option("--threads", opts.threads,
                 "threads for OpenMP kernels and GEMM (0: OMP_NUM_THREADS, else all cores)")
      ->transform(int_at_least(0, "0: OMP_NUM_THREADS, else all cores"));
  sub.add_flag_callback(
      "--bf16", [&opts] { opts.precision = ops::GemmPrecision::Bf16, opts.bf16_flag = "--bf16"; },
      "bf16 matrix products with fp32 accumulation (fp32 master weights, norms, softmax, loss, checkpoints)");
  // fairseq's other mixed-precision spellings: the same bf16 path, refused the same way.
  for (const char* alias : {"--amp", "--memory-efficient-bf16"}) {
    const std::string name = alias;
    sub.add_flag_callback(
        name, [&opts, name] { opts.precision = ops::GemmPrecision::Bf16, opts.bf16_flag = name; },
        "fairseq's flag: the same as --bf16 here (bf16 matrix products, fp32 accumulation)");
  }
  sub.add_flag_callback(
      "--fp16", [&opts] { opts.precision = ops::GemmPrecision::Bf16, opts.from_fp16 = true; },
      "fairseq's flag: --bf16 on CPU (fp32, with a warning, where the CPU has no bf16 matmul)");
}

void apply_common_options(const CommonOptions& opts) {
  // At startup, not at the first GEMM (minutes into a run, after the data is loaded).
  ops::GemmPrecision precision = opts.precision;
  if (precision == ops::GemmPrecision::Bf16 && !ops::bf16_matmul_supported()) {
    // fairseq's --fp16 is in the commands users copy (the seed documents): they keep running, in
    // fp32, and say so; an explicit --bf16 is refused.
    if (!opts.from_fp16)
      fail_usage(opts.bf16_flag + ": bf16 matmul is not supported on this CPU (" + ops::cpu_isa_summary() + ")",
                 ops::kBf16Hint);
    log_once(LogLevel::Warning, "--fp16: bf16 matmul is not supported on this CPU (" + ops::cpu_isa_summary() +
                                    "); computing in fp32");
    precision = ops::GemmPrecision::Fp32;
  }
  if (precision == ops::GemmPrecision::Bf16) apply_bf16_products(opts.from_fp16 ? "--fp16" : opts.bf16_flag);
  ops::gemm_library();  // a bad STRETCH_GEMM is a usage error now, not at the first product
  ops::linear_backward_schedule();  // the same for STRETCH_LINEAR_BACKWARD
  set_num_threads(opts.threads);
  ops::set_matmul_precision(precision);
}

CLI::Validator int_at_least(int64_t min, const std::string& allowed, std::optional<int64_t> also) {
  std::string rule = "must be an integer >= " + std::to_string(min);
  if (also) rule += " or " + std::to_string(*also);
  rule += " (" + allowed + ")";
  return CLI::Validator(
      [min, also, rule](std::string& value) -> std::string {
        if (value.empty()) return "an empty value is not allowed: " + rule;
        const char* b = value.data();
        const char* e = b + value.size();
        if (*b == '+' && e - b > 1) ++b;
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(b, e, v);
        if (ec == std::errc::result_out_of_range) return value + " is beyond the 64-bit integer range: " + rule;
        if (ec != std::errc() || end != e) return "'" + value + "' is not an integer: " + rule;
        if (v < min && !(also && v == *also)) return value + " is not allowed: " + rule;
        value = std::to_string(v);
        return "";
      },
      "", "int_at_least");
}

void add_not_built(CLI::App& sub, Runner& run, const std::string& what) {
  sub.allow_extras();
  std::string name = sub.get_name();
  run = [name, what] {
    std::cerr << "stretch " << name << ": not built yet (" << what << ")\n";
    return 2;
  };
}

void add_ignored_flag(CLI::App& sub, const std::string& name, const std::string& why, bool takes_value) {
  auto store = std::make_shared<std::string>();
  std::string n = name;
  if (takes_value) {
    sub.add_option(name, *store, "accepted for fairseq compatibility: " + why)
        ->group("fairseq compatibility")
        ->each([n, why, store](const std::string&) { log_once(LogLevel::Warning, n + " has no effect in stretch: " + why); });
  } else {
    sub.add_flag_callback(name, [n, why] { log_once(LogLevel::Warning, n + " has no effect in stretch: " + why); },
                          "accepted for fairseq compatibility: " + why)
        ->group("fairseq compatibility");
  }
}

void add_one_value_flag(CLI::App& sub, const std::string& name, const std::string& value, const std::string& why) {
  auto store = std::make_shared<std::string>();
  sub.add_option(name, *store, "accepted for fairseq compatibility: only " + value + " (" + why + ")")
      ->group("fairseq compatibility")
      ->check(CLI::Validator(
          [value, why, store](std::string& v) -> std::string {  // store: kept alive with the option
            return v == value ? "" : v + " is not allowed: only " + value + " (" + why + ")";
          },
          "", "one value"));
}

}  // namespace stretch::cli
