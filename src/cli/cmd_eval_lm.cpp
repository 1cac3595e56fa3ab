// cli/cmd_eval_lm.cpp — `stretch eval-lm DATA --path CKPT [fairseq-eval-lm flags]`.
// The ALiBi README's commands run with the program name swapped (REFERENCE.md §4.4):
//   --sample-break-mode none --gen-subset valid --max-sentences 1 --model-overrides "{...}"
//   --tokens-per-sample l --max-tokens l --max-target-positions l --context-window c
// --task truncated_bptt_lm --batch-size B --tokens-per-sample T: fairseq's examples/truncated_bptt
// evaluation (eval/eval_lm.h), with --bptt-order.
// fairseq's word-level output: --output-word-probs, --output-word-stats, --post-process / --remove-bpe
// (eval/word_output.h), and its --num-shards/--shard-id.
// stretch additions: --stride S (= --context-window L-S), --kv-cache, --alibi-interpolate, --results-json FILE,
// --dump-nll FILE (alias --output-word-probs-file: per-token NLL as TSV).
#include "cli/command.h"
#include "cli/overrides.h"
#include "core/error.h"
#include "core/log.h"
#include "data/token_blocks.h"
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
  std::string shorten_method = "none";
  int64_t max_target_positions = 0;
  std::string task = "language_modeling";
  std::string bptt_order = "fairseq";
  std::string remove_bpe;
  CLI::Option* remove_bpe_opt = nullptr;
  std::string log_format;
};
}  // namespace

void add_eval_lm(CLI::App& sub, Runner& run) {
  auto f = std::make_shared<EvalLmFlags>();
  // argparse semantics, as in fairseq and `train`: an option given twice takes the last value.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
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
  sub.add_option("--sample-break-mode", f->break_mode,
                 "none: blocks of --tokens-per-sample across lines; eos: one block per line; complete: whole lines "
                 "packed up to --tokens-per-sample (fairseq's TokenBlockDataset)")
      ->check(CLI::IsMember({"none", "eos", "complete"}))
      ->capture_default_str();
  sub.add_option("--max-target-positions", f->max_target_positions,
                 "accepted for fairseq compatibility (blocks are never longer than --tokens-per-sample)");
  sub.add_flag("--skip-invalid-size-inputs-valid-test", f->skip_invalid_size,
               "accepted for fairseq compatibility (no block is ever too long)");
  sub.add_option("--dump-nll,--output-word-probs-file", o.word_probs_path,
                 "write each scored token's NLL (TSV: offset, target id, nll in nats) to this file");
  sub.add_flag("--output-word-probs", c.output_word_probs,
               "fairseq's: print each sample's words with ln p (\"ID w [-3.141593]\\tw [...]\")");
  sub.add_flag("--output-word-stats", c.output_word_stats,
               "fairseq's: print per word: count, sum of ln p, is_bpe, sum of the next word's ln p, next count");
  sub.add_option("--post-process", c.post_process,
                 "fairseq's: '@@ ' (or subword_nmt) merges BPE pieces into words: word-level loss and output");
  f->remove_bpe_opt = sub.add_option("--remove-bpe", f->remove_bpe,
                                     "fairseq's alias of --post-process; alone it means subword_nmt, as in fairseq")
                          ->expected(0, 1);
  sub.add_option("--num-shards", o.num_shards, "fairseq's: split the batches into N shards ...")
      ->transform(int_at_least(1, "the number of shards"));
  sub.add_option("--shard-id", o.shard_id, "... and evaluate shard I (batches I, I+N, ...), 0-based")
      ->transform(int_at_least(0, "shards are numbered from 0"));
  sub.add_option("--log-format", f->log_format, "none: no progress display; json/simple/tqdm: the display")
      ->check(CLI::IsMember({"json", "none", "simple", "tqdm"}));
  sub.add_option("--results-json", c.results_json,
                 "write the result as JSON (count, loss_base2, ppl, stderr_base2, protocol, ...)");
  sub.add_flag("--alibi-interpolate", c.alibi_interpolate,
               "ALiBi position interpolation (arXiv:2310.13017): slopes x train length / --tokens-per-sample when longer");
  sub.add_flag("--kv-cache", f->kv_cache,
               "Transformer-XL-style cached evaluation for relative position methods (faster; not fairseq's protocol)");
  sub.add_option("--task", f->task,
                 "language_modeling (windows) | truncated_bptt_lm (--batch-size streams of --tokens-per-sample "
                 "segments, the model's memory carried across them) | masked_lm (encoders: masked-token perplexity "
                 "over blocks of --tokens-per-sample)")
      ->check(CLI::IsMember({"language_modeling", "truncated_bptt_lm", "masked_lm"}))
      ->capture_default_str();
  sub.add_flag("--add-bos-token", o.add_bos_token,
               "fairseq's task flag: <s> before each block, its score dropped (a model trained with "
               "--add-bos-token gets it without the flag)");
  sub.add_option("--bptt-order", f->bptt_order,
                 "truncated_bptt_lm: fairseq (targets within each block) | transformer_xl (targets cross segments)")
      ->check(CLI::IsMember({"fairseq", "transformer_xl"}))
      ->capture_default_str();
  add_ignored_flag(sub, "--softmax-batch", "the softmax runs only at scored rows, in bounded chunks", true);
  add_ignored_flag(sub, "--cpu", "stretch always runs on the CPU", false);
  add_ignored_flag(sub, "--num-workers", "data loading is memory-mapped in-process", true);
  add_ignored_flag(sub, "--user-dir", "every model is built in", true);
  sub.add_option("--seed", c.seed, "the seed of --shorten-method random_crop (evaluation draws nothing else)")
      ->transform(int_at_least(0, "numpy seeds are non-negative"))->capture_default_str();
  sub.add_option("--shorten-method", f->shorten_method,
                 "lines longer than --tokens-per-sample: none | truncate (their first tokens) | random_crop (as "
                 "fairseq's RandomCropDataset crops them)")
      ->check(CLI::IsMember({"none", "truncate", "random_crop"}))
      ->capture_default_str();
  sub.add_option("--shorten-data-split-list", c.shorten_data_split_list,
                 "the splits --shorten-method applies to, comma-separated (default: every split)");
  add_ignored_flag(sub, "--quiet", "eval-lm prints only its summary (and the word lines asked for)", false);
  add_ignored_flag(sub, "--results-path", "fairseq-eval-lm 0.12.2 writes nothing there either; --results-json FILE does",
                   true);
  add_ignored_flag(sub, "--required-batch-size-multiple",
                   "fairseq-eval-lm's batch iterator does not pass it either (its batches use 1)", true);
  add_ignored_flag(sub, "--log-interval", "the progress display updates by time and tenths", true);
  add_ignored_flag(sub, "--no-progress-bar", "off a terminal the display is already periodic lines", false);
  add_ignored_flag(sub, "--log-file", "fairseq-eval-lm 0.12.2 writes nothing there either", true);
  add_ignored_flag(sub, "--memory-efficient-fp16", "fairseq-eval-lm halves the model only with --fp16", false);
  add_ignored_flag(sub, "--distributed-world-size", "evaluation runs in one process", true);
  add_ignored_flag(sub, "--empty-cache-freq", "there is no accelerator memory cache to empty", true);
  add_ignored_flag(sub, "--all-gather-list-size", "evaluation runs in one process", true);
  add_one_value_flag(sub, "--model-parallel-size", "1", "stretch is data parallel only");
  add_one_value_flag(sub, "--dataset-impl", "mmap", "stretch reads fairseq's default format, MMIDIDX");
  run = [f] {
    apply_common_options(f->common);
    f->config.overrides = parse_model_overrides(f->overrides);
    if (f->kv_cache) f->config.options.protocol = eval::EvalProtocol::KvCache;
    f->config.options.break_mode = data::parse_break_mode(f->break_mode);
    f->config.shorten_method = data::parse_shorten_method(f->shorten_method);
    if (f->shorten_method != "none" && (f->kv_cache || f->task != "language_modeling"))
      fail_usage("--shorten-method " + f->shorten_method + " with " + (f->kv_cache ? "--kv-cache" : "--task " + f->task) +
                     ": stretch shortens the lines of the language_modeling windows only",
                 "drop --shorten-method");
    if (f->break_mode != "none" && (f->kv_cache || f->task != "language_modeling"))
      fail_usage("--sample-break-mode " + f->break_mode + " with " + (f->kv_cache ? "--kv-cache" : "--task " + f->task) +
                     ": only the language_modeling windows evaluate lines as blocks",
                 "drop --sample-break-mode (none is the stream these protocols read)");
    if (f->task == "truncated_bptt_lm") {
      if (f->kv_cache)
        fail_usage("--kv-cache and --task truncated_bptt_lm are two ways to carry state across segments",
                   "give one: truncated_bptt_lm uses the model's --mem-len memory");
      f->config.options.protocol = eval::EvalProtocol::TruncatedBptt;
      f->config.options.bptt_across_blocks = f->bptt_order == "transformer_xl";
    }
    if (f->task == "masked_lm") {
      if (f->kv_cache) fail_usage("--kv-cache with --task masked_lm: an encoder has no KV cache", "drop --kv-cache");
      if (f->config.options.add_bos_token)
        fail_usage("--add-bos-token has no meaning with --task masked_lm (fairseq's flag belongs to the "
                   "language_modeling task)",
                   "drop it: masked_lm rows already start with <s>");
      f->config.options.protocol = eval::EvalProtocol::MaskedLm;
    }
    if (f->remove_bpe_opt->count() > 0) {
      if (!f->config.post_process.empty())
        fail_usage("--remove-bpe and --post-process both given", "they are one option in fairseq: give one of them");
      f->config.post_process = f->remove_bpe.empty() ? "subword_nmt" : f->remove_bpe;
      if (f->remove_bpe.empty())
        log_once(LogLevel::Warning,
                 "--remove-bpe without a value is fairseq's 'subword_nmt', which fairseq-eval-lm 0.12.2 matches against "
                 "no symbol (nothing is merged, as there); give --remove-bpe '@@ ' to merge subword-nmt pieces");
    }
    eval::bpe_marker(f->config.post_process);  // an unsupported value is a usage error before loading anything
    f->config.no_progress = f->log_format == "none";
    return eval::run_eval_lm(f->config);
  };
}

}  // namespace stretch::cli
