// cli/command.h — how a subcommand plugs into the `stretch` binary.
// Contract: each subcommand lives in cmd_<name>.cpp and defines add_<name>(): it declares its
// flags on `sub` (fairseq names; CLI11 rejects unknown flags with the flag's name) and sets
// `run` to the function that executes it. main.cpp lists the subcommands; nothing else does.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ops/gemm.h"

namespace stretch::cli {

using Runner = std::function<int()>;

void add_preprocess(CLI::App& sub, Runner& run);
void add_train(CLI::App& sub, Runner& run);
void add_eval_lm(CLI::App& sub, Runner& run);
void add_sweep(CLI::App& sub, Runner& run);
void add_generate(CLI::App& sub, Runner& run);
void add_info(CLI::App& sub, Runner& run);
void add_import_fairseq(CLI::App& sub, Runner& run);
void add_export_fairseq(CLI::App& sub, Runner& run);

// Options every subcommand shares: --threads (0 = OMP_NUM_THREADS or all cores) and --bf16
// (alias --fp16: bf16 matrix products with fp32 accumulation; weights, optimizer state,
// LayerNorm, softmax, loss and checkpoints stay fp32).
struct CommonOptions {
  int threads = 0;
  ops::GemmPrecision precision = ops::GemmPrecision::Fp32;
  bool from_fp16 = false;  // bf16 asked for with fairseq's --fp16 (falls back to fp32 where unsupported)
  std::string bf16_flag = "--bf16";  // the spelling given (--amp, --memory-efficient-bf16: aliases of --bf16)
};
void add_common_options(CLI::App& sub, CommonOptions& opts);
// Applies them; --bf16 on a CPU without bf16 matmul (ops::bf16_matmul_supported) is a usage
// error here (exit 2), before anything is read or built; fairseq's --fp16 there computes in fp32
// with one warning (the seed documents' commands keep running).
void apply_common_options(const CommonOptions& opts);

// An integer flag's check, as fairseq's int() parses it, with a short message of our own (CLI11's
// range messages print a 309-digit bound): the value must be a decimal integer within int64 and
// >= min (or equal `also`, e.g. -1 for "unset"). `allowed` says what the flag means, e.g. "0: no
// limit". Attach it with ->transform() (->check() would discard the rewrite): the value is rewritten
// in plain decimal, so "010" is 10 as in fairseq (CLI11 alone reads it as octal 8). On failure the
// binary exits 2 with "--save-interval: 0 is not allowed: must be an integer >= 1 (save every N epochs)".
CLI::Validator int_at_least(int64_t min, const std::string& allowed, std::optional<int64_t> also = std::nullopt);

// A subcommand that is declared but not built yet: it accepts anything, says so, exits 2.
void add_not_built(CLI::App& sub, Runner& run, const std::string& what);

// fairseq flags that have no meaning in stretch: accepted (with a value if they take one) and
// reported once when given, so fairseq commands run unchanged.
void add_ignored_flag(CLI::App& sub, const std::string& name, const std::string& why, bool takes_value);

// fairseq options of which stretch does one value only (--dataset-impl mmap, --model-parallel-size 1):
// that value is accepted without a word (it is what stretch does anyway); another is a usage error
// naming the flag, the value and why.
void add_one_value_flag(CLI::App& sub, const std::string& name, const std::string& value, const std::string& why);

}  // namespace stretch::cli
