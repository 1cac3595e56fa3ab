#include "eval/sweep.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "core/log.h"
#include "core/progress_display.h"
#include "eval/require_decoder.h"
#include "eval/sweep_report.h"
#include "train/checkpoint.h"
#include "train/lm_data.h"

namespace stretch::eval {

namespace {
void check_sweep_config(const SweepConfig& cfg) {
  if (cfg.sliding && (cfg.options.context_window > 0 || cfg.options.stride > 0))
    fail_usage("sweep: --sliding sets the context to L-1 at every length; drop --context-window/--stride");
  if (cfg.paths.empty()) fail_usage("sweep: give at least one checkpoint with --path");
  if (cfg.lengths.empty()) fail_usage("sweep: give --lengths, e.g. 64,128,256,512,1024");
  if (!cfg.labels.empty() && cfg.labels.size() != cfg.paths.size())
    fail_usage("sweep: --labels has " + std::to_string(cfg.labels.size()) + " names for " +
               std::to_string(cfg.paths.size()) + " checkpoints");
}
}  // namespace

std::string sweep_protocol(const SweepConfig& cfg) {
  return cfg.sliding                       ? "sliding window (context L-1)"
         : cfg.options.stride > 0         ? "sliding window (stride " + std::to_string(cfg.options.stride) + ")"
         : cfg.options.context_window > 0 ? "sliding window (context " + std::to_string(cfg.options.context_window) + ")"
                                          : "non-overlapping";
}

std::vector<SweepRow> sweep_table(const SweepConfig& cfg) {
  check_sweep_config(cfg);
  train::LmData data = train::open_lm_data(cfg.data);
  auto stream = train::open_split_stream(cfg.data, cfg.gen_subset, data);
  std::vector<SweepRow> rows;
  for (size_t i = 0; i < cfg.paths.size(); ++i) {
    models::ModelFile ck;
    auto model = load_eval_model(cfg.paths[i], nlohmann::json::object(), &ck);
    require_decoder(model->info(), cfg.paths[i], "sweep");
    if (!models::dictionary_matches(ck, data.dict_hash) || model->info().vocab_size != data.vocab_size)
      fail_input(cfg.paths[i], "was trained with another dictionary than " + data.dict_path,
                 "sweep checkpoints trained on this data-bin");
    const models::ModelInfo info = model->info();
    const nlohmann::json model_config = model->config_json();
    const bool interpolable = model_config.value("pos", std::string()) == "alibi";
    for (int pass = 0; pass < (cfg.alibi_interpolate && interpolable ? 2 : 1); ++pass) {
      const bool interp = pass == 1;
      SweepRow row;
      row.path = cfg.paths[i];
      row.train_length = info.tokens_per_sample;
      row.label = !cfg.labels.empty() ? cfg.labels[i] : info.label + " L=" + std::to_string(row.train_length);
      if (interp) row.label += " +interp";
      for (int64_t L : cfg.lengths) {
        SweepCell cell;
        cell.length = L;
        EvalOptions o = cfg.options;
        o.tokens_per_sample = L;
        o.bos = data.bos;
        o.pad = data.pad;
        o.eos = data.eos;
        if (cfg.sliding) o.context_window = L - 1;
        std::unique_ptr<models::LanguageModel> scaled;  // the interpolated model of this length
        if (interp)
          scaled = load_eval_model(cfg.paths[i],
                                   alibi_interpolation_overrides(cfg.paths[i], model_config, nlohmann::json::object(), L),
                                   nullptr);
        // Each cell's progress as eval-lm shows it (a bar on a terminal, a line per tenth otherwise).
        std::unique_ptr<ProgressDisplay> display;
        o.on_start = [&](const EvalResult& r) {
          display = std::make_unique<ProgressDisplay>("sweep " + row.label + " L=" + std::to_string(L),
                                                      r.total_tokens, "tokens");
        };
        o.on_progress = [&](int64_t scored, int64_t) {
          display->update(scored);
          return true;
        };
        try {
          EvalResult r = evaluate(scaled ? *scaled : *model, *stream, o);
          display.reset();
          cell.ppl = r.ppl;
          cell.loss2 = r.loss2;
          cell.tokens = r.count;
          std::cerr << "sweep | " << row.label << " | L=" << L << " | ppl " << r.ppl << " (" << r.count
                    << " tokens, " << r.seconds << " s)\n";
        } catch (const Error& e) {
          cell.ppl = NAN;
          cell.loss2 = NAN;
          // The reason is the error's first line (the hint follows on the next).
          const std::string what = e.what();
          cell.note = what.substr(0, what.find('\n'));
          if (e.kind() != ErrorKind::Usage) throw;  // a broken file or a bug: not a table cell
          log_warning(row.label + " at L=" + std::to_string(L) + ": left empty: " + cell.note);
        }
        row.cells.push_back(cell);
      }
      rows.push_back(row);
    }
  }
  return rows;
}

int run_sweep(const SweepConfig& cfg) {
  check_sweep_config(cfg);
  std::filesystem::create_directories(cfg.results_dir);
  const std::vector<SweepRow> rows = sweep_table(cfg);
  const std::string protocol = sweep_protocol(cfg);
  std::cout << "\nValidation perplexity on " << cfg.gen_subset << " (" << protocol << "), rows: model and its "
            << "training length, columns: evaluation length\n\n"
            << sweep_markdown(rows, cfg.lengths) << std::endl;
  const std::string prefix = (std::filesystem::path(cfg.results_dir) / "sweep").string();
  write_sweep_csv(prefix + ".csv", rows);
  write_sweep_json(prefix + ".json", rows, protocol);
  bool plotted = plot_sweep(prefix, rows, cfg.title, "perplexity on the '" + cfg.gen_subset + "' split, " + protocol);
  std::cout << "wrote " << prefix << ".csv, " << prefix << ".json" << (plotted ? ", " + prefix + ".png, " + prefix + ".svg" : "")
            << "\n";
  return 0;
}

}  // namespace stretch::eval
