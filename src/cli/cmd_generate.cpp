// cli/cmd_generate.cpp — `stretch generate DATA --path CKPT --prompt TEXT`: sampling with a KV cache
// (Transformer-XL: its memory).
#include <cmath>
#include <cstdlib>

#include "cli/command.h"
#include "cli/overrides.h"
#include "eval/generate.h"

namespace stretch::cli {
namespace {

// A real-valued flag's check: the value must parse as a whole number text, be finite (CLI11 alone
// accepts "nan" and "inf", and NaN passes every range test) and satisfy `ok`; `rule` says what
// is allowed.
CLI::Validator finite_where(bool (*ok)(double), const std::string& rule) {
  return CLI::Validator(
      [ok, rule](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || end != value.c_str() + value.size()) return "'" + value + "' is not a number: " + rule;
        if (!std::isfinite(v) || !ok(v)) return value + " is not allowed: " + rule;
        return "";
      },
      "", "finite");
}

}  // namespace

void add_generate(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<eval::GenerateConfig>();
  auto common = std::make_shared<CommonOptions>();
  auto overrides = std::make_shared<std::string>();
  // argparse semantics, as in fairseq, train and eval-lm: an option given twice takes the last value.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_common_options(sub, *common);
  auto& c = *cfg;
  sub.add_option("data", c.data,
                 "data-bin directory whose dict.txt the model was trained with (default: the dictionary stored in "
                 "the model file)");
  sub.add_option("--path", c.path, "checkpoint")->required();
  sub.add_option("--prompt", c.prompt, "text to continue (tokenised like the training data)");
  sub.add_option("--max-len,--max-len-b", c.sampling.max_len, "new tokens to generate")
      ->capture_default_str()
      ->transform(int_at_least(0, "new tokens to generate"));
  sub.add_option("--temperature", c.sampling.temperature, "0: greedy")
      ->capture_default_str()
      ->check(finite_where([](double v) { return v >= 0; }, "must be a finite number >= 0 (0: greedy)"));
  sub.add_option("--top-k,--sampling-topk", c.sampling.top_k, "sample from the k most likely tokens (0: all)")
      ->transform(int_at_least(0, "0: all tokens"));
  sub.add_option("--top-p,--sampling-topp", c.sampling.top_p, "nucleus sampling mass in (0, 1] (1: off)")
      ->capture_default_str()
      ->check(finite_where([](double v) { return v > 0 && v <= 1; }, "must be a number in (0, 1] (1: off)"));
  sub.add_option("--seed", c.seed)->capture_default_str();
  sub.add_option("--nbest", c.nbest, "number of samples")->capture_default_str()->transform(int_at_least(1, "samples to draw"));
  sub.add_flag("--print-scores", c.print_scores,
               "after each sample, a line 'ids' with the new token ids and a line 'logprobs' with their natural-log "
               "probabilities under the model");
  sub.add_option("--model-overrides", *overrides, "JSON or Python dict literal of model config keys");
  run = [cfg, common, overrides] {
    apply_common_options(*common);
    cfg->overrides = parse_model_overrides(*overrides);
    return eval::run_generate(*cfg);
  };
}

}  // namespace stretch::cli
