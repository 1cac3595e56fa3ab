// cli/cmd_generate.cpp — `stretch generate DATA --path CKPT --prompt TEXT`: sampling with a KV cache.
#include "cli/command.h"
#include "cli/overrides.h"
#include "eval/generate.h"

namespace stretch::cli {

void add_generate(CLI::App& sub, Runner& run) {
  auto cfg = std::make_shared<eval::GenerateConfig>();
  auto common = std::make_shared<CommonOptions>();
  auto overrides = std::make_shared<std::string>();
  add_common_options(sub, *common);
  auto& c = *cfg;
  sub.add_option("data", c.data,
                 "data-bin directory whose dict.txt the model was trained with (default: the dictionary stored in "
                 "the model file)");
  sub.add_option("--path", c.path, "checkpoint")->required();
  sub.add_option("--prompt", c.prompt, "text to continue (tokenised like the training data)");
  sub.add_option("--max-len,--max-len-b", c.sampling.max_len, "new tokens to generate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--temperature", c.sampling.temperature, "0: greedy")->capture_default_str()->check(CLI::NonNegativeNumber);
  sub.add_option("--top-k,--sampling-topk", c.sampling.top_k, "sample from the k most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--top-p,--sampling-topp", c.sampling.top_p, "nucleus sampling mass in (0, 1] (1: off)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1.0));
  sub.add_option("--seed", c.seed)->capture_default_str();
  sub.add_option("--nbest", c.nbest, "number of samples")->capture_default_str()->check(CLI::PositiveNumber);
  sub.add_option("--model-overrides", *overrides, "JSON or Python dict literal of model config keys");
  run = [cfg, common, overrides] {
    apply_common_options(*common);
    cfg->overrides = parse_model_overrides(*overrides);
    return eval::run_generate(*cfg);
  };
}

}  // namespace stretch::cli
