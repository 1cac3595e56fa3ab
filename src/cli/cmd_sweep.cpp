// cli/cmd_sweep.cpp — `stretch sweep DATA --path A.pt,B.pt --lengths 64,128,...`.
#include "cli/command.h"
#include "core/error.h"
#include "eval/sweep.h"

namespace stretch::cli {
namespace {

// A comma-separated list flag with argparse's rule (as fairseq's comma-separated string flags):
// given twice, the last one wins whole; CLI11's vector options would append instead.
// `check` (optional) validates each item and may rewrite it; its message names the flag.
CLI::Option* add_list_option(CLI::App& sub, const std::string& flag, std::vector<std::string>& target,
                             const std::string& help, std::optional<CLI::Validator> check = std::nullopt) {
  return sub.add_option_function<std::string>(
      flag,
      [&target, flag, check](const std::string& text) {
        target.clear();
        std::string::size_type start = 0;
        while (true) {
          const auto comma = text.find(',', start);
          std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          if (check) {
            const std::string err = (*check)(item);
            if (!err.empty()) fail_usage(flag + ": " + err);
          }
          target.push_back(item);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      },
      help);
}

}  // namespace

void add_sweep(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<eval::SweepConfig>();
  auto common = std::make_shared<CommonOptions>();
  auto lengths = std::make_shared<std::vector<std::string>>();
  // argparse semantics, as in fairseq, train and eval-lm: an option given twice takes the last value.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_common_options(sub, *common);
  auto& c = *cfg;
  sub.add_option("data", c.data, "data-bin directory")->required();
  add_list_option(sub, "--path", c.paths, "checkpoints, comma separated")->required();
  add_list_option(sub, "--labels", c.labels, "names for the rows, comma separated");
  add_list_option(sub, "--lengths", *lengths, "evaluation lengths, comma separated",
                  int_at_least(1, "an evaluation length in tokens, e.g. 64,128,256"))
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
  run = [cfg, common, lengths] {
    apply_common_options(*common);
    cfg->lengths.clear();
    for (const std::string& l : *lengths) cfg->lengths.push_back(std::stoll(l));  // checked by int_at_least
    return eval::run_sweep(*cfg);
  };
}

}  // namespace stretch::cli
