// cli/cmd_sweep.cpp — `stretch sweep DATA --path A.pt,B.pt --lengths 64,128,...`.
#include "cli/command.h"
#include "eval/sweep.h"

namespace stretch::cli {

void add_sweep(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<eval::SweepConfig>();
  auto common = std::make_shared<CommonOptions>();
  add_common_options(sub, *common);
  auto& c = *cfg;
  sub.add_option("data", c.data, "data-bin directory")->required();
  sub.add_option("--path", c.paths, "checkpoints, comma separated")->delimiter(',')->required();
  sub.add_option("--labels", c.labels, "names for the rows, comma separated")->delimiter(',');
  sub.add_option("--lengths", c.lengths, "evaluation lengths, comma separated")
      ->delimiter(',')
      ->transform(int_at_least(1, "an evaluation length in tokens, e.g. 64,128,256"))
      ->required();
  sub.add_option("--gen-subset", c.gen_subset)->capture_default_str();
  sub.add_option("--context-window", c.options.context_window, "context tokens per window at every length")
      ->transform(int_at_least(0, "0: non-overlapping blocks"));
  sub.add_option("--stride", c.options.stride, "score S new tokens per window at every length")
      ->transform(int_at_least(1, "new tokens scored per window"));
  sub.add_flag("--sliding", c.sliding, "sliding window with context L-1 at every length (slow: L x the tokens)");
  sub.add_option("--max-sentences,--batch-size", c.options.max_sentences, "windows per forward pass");
  sub.add_option("--max-tokens", c.options.max_tokens);
  sub.add_option("--results-dir", c.results_dir, "where sweep.{csv,json,png,svg} go")->capture_default_str();
  sub.add_option("--title", c.title, "plot title")->capture_default_str();
  sub.add_flag("--alibi-interpolate", c.alibi_interpolate,
               "add a row per ALiBi model with slopes x train length / L (position interpolation, arXiv:2310.13017)");
  run = [cfg, common] {
    apply_common_options(*common);
    return eval::run_sweep(*cfg);
  };
}

}  // namespace stretch::cli
