// eval/sweep.h — `stretch sweep`: every checkpoint at every evaluation length with the
// eval-lm protocol (eval/eval_lm.h); the Markdown table on stdout, CSV + JSON + the plot
// (eval/sweep_report.h) under --results-dir. A cell a model cannot produce (learned
// positions past their table) is left empty with the reason, never a crash.
#pragma once
#include <string>
#include <vector>

#include "eval/eval_lm.h"
#include "eval/sweep_report.h"

namespace stretch::eval {

struct SweepConfig {
  std::string data;
  std::vector<std::string> paths;   // checkpoints
  std::vector<std::string> labels;  // optional, one per checkpoint
  std::vector<int64_t> lengths;
  std::string gen_subset = "valid";
  EvalOptions options;              // --context-window c / --stride S / batching, the same at every length
  bool sliding = false;             // --sliding: context window L−1 at each length L (L× the cost)
  std::string results_dir = "sweep";
  std::string title = "train short, test long";
  // --alibi-interpolate: every ALiBi model gets a second row "<label> +interp" evaluated with its
  // slopes · min(1, L_train / L) (arXiv:2310.13017), so the plot draws both curves; other models
  // keep their one row.
  bool alibi_interpolate = false;
};

// The table run_sweep prints and plots: one row per checkpoint (and per +interp variant), one cell
// per length, computed as eval-lm computes it; writes nothing. The Python module (python/) calls it.
std::vector<SweepRow> sweep_table(const SweepConfig& config);
// How the table was measured: "non-overlapping", "sliding window (stride S)", ...
std::string sweep_protocol(const SweepConfig& config);

int run_sweep(const SweepConfig& config);

}  // namespace stretch::eval
