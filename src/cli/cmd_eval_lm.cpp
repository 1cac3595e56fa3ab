// cli/cmd_eval_lm.cpp — `stretch eval-lm DATA --path CKPT [fairseq-eval-lm flags]`.
// The ALiBi README's commands run with the program name swapped (REFERENCE.md §4.4):
//   --sample-break-mode none --gen-subset valid --max-sentences 1 --model-overrides "{...}"
//   --tokens-per-sample l --max-tokens l --max-target-positions l --context-window c
// --task truncated_bptt_lm --batch-size B --tokens-per-sample T: fairseq's examples/truncated_bptt
// evaluation (eval/eval_lm.h). stretch additions: --bptt-order, --stride S (= --context-window L-S), --kv-cache, --alibi-interpolate, --results-json FILE,
// --output-word-probs FILE (per-token NLL as TSV).
#include "cli/command.h"
#include "cli/overrides.h"
#include "core/error.h"
#include "eval/eval_lm.h"

namespace stretch::cli {
namespace {
// Everything the flags write into; owned by the runner so it outlives parsing.
struct EvalLmFlags {
  eval::EvalLmConfig config;
  CommonOptions common;
  std::string overrides;
  bool kv_cache = false;
  bool skip_invalid_size = false;
  std::string break_mode = "none";
  int64_t max_target_positions = 0;
  std::string task = "language_modeling";
  std::string bptt_order = "fairseq";
};
}  // namespace

void add_eval_lm(CLI::App& sub, Runner& run) {
  auto f = std::make_shared<EvalLmFlags>();
  add_common_options(sub, f->common);
  auto& c = f->config;
  auto& o = f->config.options;
  sub.add_option("data", c.data, "data-bin directory")->required();
  sub.add_option("--path", c.path, "checkpoint (a stretch .pt/.safetensors file)")->required();
  sub.add_option("--gen-subset", c.gen_subset, "split to evaluate")->capture_default_str();
  sub.add_option("--tokens-per-sample", o.tokens_per_sample, "evaluation length L (default: the model's)")
      ->transform(int_at_least(1, "the evaluation length in tokens"));
  sub.add_option("--context-window", o.context_window, "tokens of context before each scored block (sliding window)")
      ->transform(int_at_least(0, "0: non-overlapping blocks"));
  sub.add_option("--stride", o.stride, "score S new tokens per window: the same as --context-window L-S")
      ->transform(int_at_least(1, "new tokens scored per window"));
  sub.add_option("--max-sentences,--batch-size", o.max_sentences, "windows per forward pass")
      ->transform(int_at_least(0, "0: no limit"));
  sub.add_option("--max-tokens", o.max_tokens, "block tokens (without context) per forward pass")
      ->transform(int_at_least(0, "0: no limit"));
  sub.add_option("--model-overrides", f->overrides, "Python dict literal or JSON of model config keys");
  sub.add_option("--sample-break-mode", f->break_mode, "blocks ignore line breaks (fairseq's none)")
      ->check(CLI::IsMember({"none"}));
  sub.add_option("--max-target-positions", f->max_target_positions,
                 "accepted for fairseq compatibility (blocks are never longer than --tokens-per-sample)");
  sub.add_flag("--skip-invalid-size-inputs-valid-test", f->skip_invalid_size,
               "accepted for fairseq compatibility (no block is ever too long)");
  sub.add_option("--output-word-probs,--dump-nll", o.word_probs_path,
                 "write each scored token's NLL (TSV: offset, target id, nll in nats) to this file");
  sub.add_option("--results-json", c.results_json,
                 "write the result as JSON (count, loss_base2, ppl, stderr_base2, protocol, ...)");
  sub.add_flag("--alibi-interpolate", c.alibi_interpolate,
               "ALiBi position interpolation (arXiv:2310.13017): slopes x train length / --tokens-per-sample when longer");
  sub.add_flag("--kv-cache", f->kv_cache,
               "Transformer-XL-style cached evaluation for relative position methods (faster; not fairseq's protocol)");
  sub.add_option("--task", f->task,
                 "language_modeling (windows) | truncated_bptt_lm (--batch-size streams of --tokens-per-sample "
                 "segments, the model's memory carried across them)")
      ->check(CLI::IsMember({"language_modeling", "truncated_bptt_lm"}))
      ->capture_default_str();
  sub.add_option("--bptt-order", f->bptt_order,
                 "truncated_bptt_lm: fairseq (targets within each block) | transformer_xl (targets cross segments)")
      ->check(CLI::IsMember({"fairseq", "transformer_xl"}))
      ->capture_default_str();
  add_ignored_flag(sub, "--softmax-batch", "the softmax runs only at scored rows, in bounded chunks", true);
  add_ignored_flag(sub, "--cpu", "stretch always runs on the CPU", false);
  add_ignored_flag(sub, "--num-workers", "data loading is memory-mapped in-process", true);
  add_ignored_flag(sub, "--user-dir", "every model is built in", true);
  add_ignored_flag(sub, "--seed", "evaluation draws nothing at random (no dropout, no sampling)", true);
  add_ignored_flag(sub, "--quiet", "eval-lm prints only its summary (per-token scores go to --output-word-probs FILE)",
                   false);
  run = [f] {
    apply_common_options(f->common);
    f->config.overrides = parse_model_overrides(f->overrides);
    if (f->kv_cache) f->config.options.protocol = eval::EvalProtocol::KvCache;
    if (f->task == "truncated_bptt_lm") {
      if (f->kv_cache)
        fail_usage("--kv-cache and --task truncated_bptt_lm are two ways to carry state across segments",
                   "give one: truncated_bptt_lm uses the model's --mem-len memory");
      f->config.options.protocol = eval::EvalProtocol::TruncatedBptt;
      f->config.options.bptt_across_blocks = f->bptt_order == "transformer_xl";
    }
    return eval::run_eval_lm(f->config);
  };
}

}  // namespace stretch::cli
