// cli/cmd_eval_lm.cpp — `stretch eval-lm DATA --path CKPT [fairseq-eval-lm flags]`.
#include "cli/command.h"
#include "cli/overrides.h"
#include "eval/eval_lm.h"

namespace stretch::cli {

void add_eval_lm(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<eval::EvalLmConfig>();
  auto common = std::make_shared<CommonOptions>();
  auto overrides = std::make_shared<std::string>();
  auto kv_cache = std::make_shared<bool>(false);
  auto break_mode = std::make_shared<std::string>("none");
  auto max_target_positions = std::make_shared<int64_t>(0);
  add_common_options(sub, *common);
  auto& c = *cfg;
  auto& o = cfg->options;
  sub.add_option("data", c.data, "data-bin directory")->required();
  sub.add_option("--path", c.path, "checkpoint (a stretch .pt/.safetensors file)")->required();
  sub.add_option("--gen-subset", c.gen_subset, "split to evaluate")->capture_default_str();
  sub.add_option("--tokens-per-sample", o.tokens_per_sample, "evaluation length L (default: the model's)");
  sub.add_option("--context-window", o.context_window, "tokens of context before each scored block (sliding window)");
  sub.add_option("--stride", o.stride, "score S new tokens per window: the same as --context-window L-S");
  sub.add_option("--max-sentences,--batch-size", o.max_sentences, "windows per forward pass");
  sub.add_option("--max-tokens", o.max_tokens, "tokens per forward pass (windows = max_tokens / L when no --max-sentences)");
  sub.add_option("--model-overrides", *overrides, "Python dict literal or JSON of model config keys");
  sub.add_option("--sample-break-mode", *break_mode, "only none is meaningful for evaluation")->check(CLI::IsMember({"none"}));
  sub.add_option("--max-target-positions", *max_target_positions, "accepted for fairseq compatibility");
  sub.add_flag("--skip-invalid-size-inputs-valid-test", c.skip_invalid_size);
  sub.add_option("--output-word-probs,--dump-nll", o.word_probs_path, "write each scored token's NLL (TSV) to this file");
  sub.add_flag("--kv-cache", *kv_cache,
               "Transformer-XL-style cached evaluation for relative position methods (faster; not fairseq's protocol)");
  add_ignored_flag(sub, "--task", "stretch evaluates language_modeling data", true);
  add_ignored_flag(sub, "--softmax-batch", "the softmax runs only at scored rows", true);
  run = [cfg, common, overrides, kv_cache] {
    apply_common_options(*common);
    cfg->overrides = parse_model_overrides(*overrides);
    if (*kv_cache) cfg->options.protocol = eval::EvalProtocol::KvCache;
    return eval::run_eval_lm(*cfg);
  };
}

}  // namespace stretch::cli
