#include "eval/sweep_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/orphans.h"
#include "core/output_file.h"
#include "core/subprocess.h"

namespace stretch::eval {
namespace {

std::string fmt(double v, const char* f = "%.2f") {
  if (std::isnan(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void write_file(const std::string& path, const std::string& text) { write_file_atomically(path, "the sweep table", text); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// gnuplot exits 0 when its output file could not be written in full (a full disk): a PNG must
// end with its IEND chunk, an SVG with </svg>.
bool image_complete(const std::string& path) {
  const std::string b = read_all(path);
  auto ends_with = [&](const std::string& tail) {
    const size_t end = b.find_last_not_of(" \t\r\n");
    return end != std::string::npos && end + 1 >= tail.size() && b.compare(end + 1 - tail.size(), tail.size(), tail) == 0;
  };
  if (b.rfind("\x89PNG\r\n\x1a\n", 0) == 0) return b.size() >= 20 && b.compare(b.size() - 8, 4, "IEND") == 0;
  return b.find("<svg") != std::string::npos && ends_with("</svg>");
}

// RFC 4180 field: quoted when it holds a comma, quote or line break; quotes doubled.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// A gnuplot single-quoted string: ' is written ''.
std::string gp_quote(const std::string& v) {
  std::string out = "'";
  for (char ch : v) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

std::string sweep_markdown(const std::vector<SweepRow>& rows, const std::vector<int64_t>& lengths) {
  std::ostringstream os;
  os << "| model (train L) |";
  for (int64_t L : lengths) os << " " << L << " |";
  os << "\n|---|";
  for (size_t i = 0; i < lengths.size(); ++i) os << "---|";
  os << "\n";
  for (const auto& r : rows) {
    os << "| " << r.label << " |";
    for (int64_t L : lengths) {
      double ppl = NAN;
      for (const auto& c : r.cells)
        if (c.length == L) ppl = c.ppl;
      os << " " << fmt(ppl) << " |";
    }
    os << "\n";
  }
  bool first = true;
  for (const auto& r : rows)
    for (const auto& c : r.cells)
      if (std::isnan(c.ppl)) {
        os << (first ? "\n" : "") << "– " << r.label << " at " << c.length << ": " << c.note << "\n";
        first = false;
      }
  return os.str();
}

void write_sweep_csv(const std::string& path, const std::vector<SweepRow>& rows) {
  std::ostringstream os;
  os << "label,checkpoint,train_length,eval_length,ppl,loss_base2,tokens,note\n";
  for (const auto& r : rows)
    for (const auto& c : r.cells)
      os << csv_field(r.label) << "," << csv_field(r.path) << "," << r.train_length << "," << c.length << ","
         << (std::isnan(c.ppl) ? "" : fmt(c.ppl, "%.6f")) << "," << (std::isnan(c.loss2) ? "" : fmt(c.loss2, "%.6f"))
         << "," << c.tokens << "," << csv_field(c.note) << "\n";
  write_file(path, os.str());
}

void write_sweep_json(const std::string& path, const std::vector<SweepRow>& rows, const std::string& protocol) {
  nlohmann::json j = {{"protocol", protocol}, {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& c : r.cells)
      cells.push_back({{"eval_length", c.length},
                       {"ppl", std::isnan(c.ppl) ? nlohmann::json(nullptr) : nlohmann::json(c.ppl)},
                       {"loss_base2", std::isnan(c.loss2) ? nlohmann::json(nullptr) : nlohmann::json(c.loss2)},
                       {"tokens", c.tokens},
                       {"note", c.note}});
    j["rows"].push_back({{"label", r.label}, {"checkpoint", r.path}, {"train_length", r.train_length}, {"cells", cells}});
  }
  write_file(path, j.dump(2) + "\n");
}

// gnuplot's double-quoted string: backslash escapes, so the title can have two lines.
static std::string gp_dquote(const std::string& v) {
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\', out += ch;
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out + "\"";
}

std::string sweep_plot_script(const std::vector<SweepRow>& rows, const std::string& title, const std::string& subtitle,
                              const std::string& data_path, const std::vector<size_t>& plotted) {
  double ymin = INFINITY, ymax = 0;
  int64_t xmin = 0, xmax = 0;
  auto widen = [&](int64_t x) {
    if (x <= 0) return;
    xmin = xmin == 0 ? x : std::min(xmin, x);
    xmax = std::max(xmax, x);
  };
  for (const auto& r : rows) {
    widen(r.train_length);
    for (const auto& c : r.cells) {
      widen(c.length);
      if (!std::isnan(c.ppl)) ymin = std::min(ymin, c.ppl), ymax = std::max(ymax, c.ppl);
    }
  }
  std::ostringstream gp;
  // Two lines: the user's title, then what was measured (split and protocol).
  gp << "set title " << gp_dquote(subtitle.empty() ? title : title + "\n" + subtitle) << "\n"
     << "set xlabel 'evaluation length (tokens, log scale)'\nset ylabel 'perplexity'\n"
     << "set logscale x 2\nset grid\nset key below box\nset bmargin 6\nset tmargin 5\n";
  // The x range leaves a third of an octave on each side, so a training length equal to the
  // smallest (or largest) evaluated length is a visible line inside the frame, not its border.
  if (xmin > 0) {
    const double pad = std::pow(2.0, 1.0 / 3.0);
    gp << "set xrange [" << static_cast<double>(xmin) / pad << ":" << static_cast<double>(xmax) * pad << "]\n";
  }
  if (ymax > 4 * ymin) gp << "set logscale y\n";
  // Each training length once: a dashed line across the plot, its label above the frame (in the
  // top margin), where it covers no point whatever the curves do.
  std::vector<int64_t> marked;
  for (const auto& r : rows)
    if (r.train_length > 0 && std::find(marked.begin(), marked.end(), r.train_length) == marked.end()) {
      marked.push_back(r.train_length);
      gp << "set arrow from " << r.train_length << ", graph 0 to " << r.train_length
         << ", graph 1 nohead dashtype 2 lw 1.5 lc rgb 'gray40'\n"
         << "set label 'train L=" << r.train_length << "' at " << r.train_length
         << ", graph 1 center offset 0,0.7 textcolor rgb 'gray40'\n";
    }
  gp << "plot ";
  for (size_t k = 0; k < plotted.size(); ++k)
    gp << (k ? ", " : "") << gp_quote(data_path) << " index " << k << " with linespoints lw 2 pt 7 title "
       << gp_quote(rows[plotted[k]].label);
  gp << "\n";
  return gp.str();
}

bool plot_sweep(const std::string& prefix, const std::vector<SweepRow>& rows, const std::string& title,
                const std::string& subtitle) {
  // Every scratch file of the plot is "<prefix>.<what>.tmp.<pid>": what a killed sweep left
  // (kill -9 while gnuplot ran) is removed here, by pid as core/orphans.h does.
  const std::string pid = std::to_string(::getpid());
  {
    const std::filesystem::path p(prefix);
    const std::string stem = p.filename().string() + ".";
    remove_dead_orphans(p.has_parent_path() ? p.parent_path().string() : ".",
                        [&stem](const std::string& name) -> std::optional<pid_t> {
                          if (name.compare(0, stem.size(), stem) != 0) return std::nullopt;
                          return pid_after_suffix_marker(name, ".tmp.");
                        });
  }
  if (run_shell("command -v gnuplot >/dev/null 2>&1") != 0) {
    log_warning("gnuplot not found: no plot written (scripts/setup.sh installs gnuplot-nox)");
    return false;
  }
  // One data block per row that has at least one value (gnuplot's `index` counts blocks).
  const std::string data_path = prefix + ".dat.tmp." + pid;
  std::vector<size_t> plotted;
  {
    OutputFile d_file(data_path, "the plot's data");
    std::ostream& d = d_file.stream();
    for (size_t i = 0; i < rows.size(); ++i) {
      bool any = false;
      for (const auto& c : rows[i].cells) any = any || !std::isnan(c.ppl);
      if (!any) continue;
      plotted.push_back(i);
      d << "# " << rows[i].label << "\n";
      for (const auto& c : rows[i].cells)
        if (!std::isnan(c.ppl)) d << c.length << " " << c.ppl << "\n";
      d << "\n\n";
    }
    d_file.commit();
  }
  if (plotted.empty()) {
    log_warning("sweep: no cell has a value: no plot written");
    std::remove(data_path.c_str());
    return false;
  }
  std::ostringstream gp;
  gp << sweep_plot_script(rows, title, subtitle, data_path, plotted);
  // Each file is drawn into a temporary name and renamed into place, so a failed gnuplot run
  // leaves no broken image. PNG: pngcairo (antialiased), else libgd's png terminal; both are
  // in Debian's gnuplot-nox.
  auto draw = [&](const std::string& terminal, const std::string& out) {
    const std::string tmp = out + ".tmp." + pid, script_path = out + ".gp.tmp." + pid, log_path = out + ".log.tmp." + pid;
    write_file_atomically(script_path, "the gnuplot script", "set terminal " + terminal + "\nset output " + gp_quote(tmp) +
                                                                  "\n" + gp.str() + "unset output\n");
    const std::string cmd = "gnuplot " + gp_quote(script_path) + " >" + gp_quote(log_path) + " 2>&1";
    const bool drawn = run_shell(cmd) == 0 && image_complete(tmp) && std::rename(tmp.c_str(), out.c_str()) == 0;
    if (!drawn) {
      log(LogLevel::Debug, "gnuplot (" + terminal + ") failed: " + read_all(log_path));
      std::remove(tmp.c_str());
    }
    std::remove(script_path.c_str());
    std::remove(log_path.c_str());
    return drawn;
  };
  // gnuplot is there, so a plot it cannot write (a full disk, a read-only directory) is an error,
  // not a warning after which sweep exits 0 (issue 17, defect 7). The .csv and .json are complete.
  const bool png = draw("pngcairo size 900,600 font ',11'", prefix + ".png") || draw("png size 900,600", prefix + ".png");
  const bool svg = png && draw("svg size 900,600 dynamic", prefix + ".svg");
  std::remove(data_path.c_str());
  if (!png || !svg)
    fail_io(prefix + (png ? ".svg" : ".png"), "gnuplot could not write the plot in full (nothing was written there)",
            "free disk space, or choose a writable --results-dir; " + prefix + ".csv and .json are complete");
  return true;
}

}  // namespace stretch::eval
