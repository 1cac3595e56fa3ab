// cli/cmd_export_fairseq.cpp — `stretch export-fairseq MODEL --out OUT.pt`: a stretch model file
// (or training checkpoint; its weights) → a checkpoint fairseq-eval-lm loads
// (models/fairseq/fairseq_export.h).
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "core/error.h"
#include "models/fairseq/fairseq_export.h"
#include "models/model_file.h"

namespace stretch::cli {

void add_export_fairseq(CLI::App& sub, Runner& run) {
  struct Options {
    CommonOptions common;
    std::string in, out;
  };
  auto o = std::make_shared<Options>();
  add_common_options(sub, o->common);
  sub.add_option("model", o->in, "a stretch model file or checkpoint")->required();
  sub.add_option("--out", o->out, "the fairseq checkpoint (.pt) to write")->required();
  run = [o] {
    apply_common_options(o->common);
    if (std::filesystem::exists(o->out) && std::filesystem::equivalent(o->in, o->out))
      fail_usage("--out " + o->out + " is the model being exported", "write the .pt elsewhere");
    models::ModelFile contents;  // the file as read once: its training-state tensors are still in it
    auto model = models::load_model(o->in, nlohmann::json::object(), models::OverrideUse::Evaluation, &contents);
    // A `stretch train --store-ema` checkpoint's moving averages go to extra_state["ema"] (train/ema.h).
    NamedTensors ema;
    for (const auto& [name, t] : contents.file.tensors)
      if (name.rfind("ema.", 0) == 0) ema.emplace_back(name.substr(4), t);
    models::export_fairseq(*model, o->out, ema.empty() ? nullptr : &ema);
    if (model->info().family == "adaptive_span")
      std::cout << "export-fairseq | wrote " << o->out << " (fairseq examples/adaptive_span, args Namespace; evaluate "
                << "with fairseq-eval-lm DATA --path " << o->out << " --user-dir examples/adaptive_span --task "
                << "truncated_bptt_lm --batch-size 8 --tokens-per-sample " << model->info().tokens_per_sample << ")\n";
    else if (model->info().family == "transformer_xl")
      std::cout << "export-fairseq | wrote " << o->out << " (fairseq examples/truncated_bptt transformer_xl, args "
                << "Namespace; evaluate with fairseq-eval-lm DATA --path " << o->out << " --user-dir "
                << "examples/truncated_bptt --task truncated_bptt_lm --batch-size 8 --tokens-per-sample "
                << model->info().tokens_per_sample << ")\n";
    else
      std::cout << "export-fairseq | wrote " << o->out << " (fairseq transformer_lm, args Namespace; evaluate with "
                << "fairseq-eval-lm DATA --path " << o->out << ")\n";
    if (!ema.empty())
      std::cout << "export-fairseq | with the run's EMA (--store-ema) as extra_state['ema']: fairseq's "
                << "checkpoint_utils.save_ema_as_checkpoint(" << o->out << ", EMA.pt) makes it the model\n";
    return 0;
  };
}

}  // namespace stretch::cli
