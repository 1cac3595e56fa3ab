// eval/sweep_report.h — the extrapolation table of `stretch sweep`: rows = checkpoints,
// columns = evaluation lengths, cells = perplexity. Written as Markdown (stdout), CSV and JSON,
// and drawn with gnuplot (Debian's gnuplot-nox) as PNG and SVG: perplexity vs evaluation
// length, log-scaled length axis, one line per checkpoint, each training length marked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stretch::eval {

struct SweepCell {
  int64_t length = 0;
  double ppl = 0;        // NaN: not evaluated (e.g. learned positions past their table)
  double loss2 = 0;      // base-2 loss per token
  int64_t tokens = 0;
  std::string note;      // why a cell is empty
};

struct SweepRow {
  std::string label;     // e.g. "alibi L=64"
  std::string path;      // checkpoint
  int64_t train_length = 0;
  std::vector<SweepCell> cells;
};

std::string sweep_markdown(const std::vector<SweepRow>& rows, const std::vector<int64_t>& lengths);
void write_sweep_csv(const std::string& path, const std::vector<SweepRow>& rows);
void write_sweep_json(const std::string& path, const std::vector<SweepRow>& rows, const std::string& protocol);
// Writes <prefix>.png and <prefix>.svg (each drawn under a temporary name, checked to be a whole
// PNG / SVG, then renamed); returns false (with a warning) if gnuplot is missing or no cell has a
// value. With gnuplot there, a plot it cannot write in full (full disk, read-only directory) is an
// Error naming the file; no partial image is left.
// `subtitle` (the title's second line) says what was measured, e.g. "valid split, non-overlapping".
bool plot_sweep(const std::string& prefix, const std::vector<SweepRow>& rows, const std::string& title,
                const std::string& subtitle);
// The gnuplot commands plot_sweep runs (after `set terminal`/`set output`): title and subtitle,
// an x range padded by a third of an octave on each side, a dashed line at each training length
// with its label above the frame, one line per row in `plotted` (data blocks of `data_path`).
std::string sweep_plot_script(const std::vector<SweepRow>& rows, const std::string& title, const std::string& subtitle,
                              const std::string& data_path, const std::vector<size_t>& plotted);

}  // namespace stretch::eval
