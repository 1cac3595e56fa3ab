#include "eval/sweep_report.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/log.h"

namespace stretch::eval {
namespace {

std::string fmt(double v, const char* f = "%.2f") {
  if (std::isnan(v)) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) fail_io(path, "cannot write", "check that the directory exists and is writable");
    out << text;
    out.flush();
    if (!out) fail_io(path, "write failed (disk full?)", "free space and rerun");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail_io(path, "cannot rename the temporary file into place");
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
  return os.str();
}

void write_sweep_csv(const std::string& path, const std::vector<SweepRow>& rows) {
  std::ostringstream os;
  os << "label,checkpoint,train_length,eval_length,ppl,loss_base2,tokens,note\n";
  for (const auto& r : rows)
    for (const auto& c : r.cells)
      os << r.label << "," << r.path << "," << r.train_length << "," << c.length << "," << fmt(c.ppl, "%.6f") << ","
         << fmt(c.loss2, "%.6f") << "," << c.tokens << "," << c.note << "\n";
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

bool plot_sweep(const std::string& prefix, const std::vector<SweepRow>& rows, const std::string& title) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    log_warning("gnuplot not found: no plot written (scripts/setup.sh installs gnuplot-nox)");
    return false;
  }
  const std::string data_path = prefix + ".dat";
  {
    std::ofstream d(data_path);
    for (size_t i = 0; i < rows.size(); ++i) {
      d << "# " << rows[i].label << "\n";
      for (const auto& c : rows[i].cells)
        if (!std::isnan(c.ppl)) d << c.length << " " << c.ppl << "\n";
      d << "\n\n";
    }
  }
  double ymin = INFINITY, ymax = 0;
  for (const auto& r : rows)
    for (const auto& c : r.cells)
      if (!std::isnan(c.ppl)) ymin = std::min(ymin, c.ppl), ymax = std::max(ymax, c.ppl);
  std::ostringstream gp;
  gp << "set title '" << title << "'\n"
     << "set xlabel 'evaluation length (tokens)'\nset ylabel 'perplexity'\n"
     << "set logscale x 2\nset grid\nset key top left\n";
  if (ymax > 4 * ymin) gp << "set logscale y\n";
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].train_length > 0)
      gp << "set arrow from " << rows[i].train_length << ", graph 0 to " << rows[i].train_length
         << ", graph 1 nohead dashtype 2 lc rgb 'gray'\n";
  gp << "plot ";
  for (size_t i = 0; i < rows.size(); ++i)
    gp << (i ? ", " : "") << "'" << data_path << "' index " << i << " with linespoints lw 2 pt 7 title '"
       << rows[i].label << "'";
  gp << "\n";
  bool ok = true;
  for (const auto& [term, ext] : {std::pair<std::string, std::string>{"pngcairo size 900,600", "png"},
                                  {"svg size 900,600", "svg"}}) {
    std::string script_path = prefix + "." + ext + ".gp";
    {
      std::ofstream s(script_path);
      s << "set terminal " << term << "\nset output '" << prefix << "." << ext << "'\n" << gp.str();
    }
    std::string cmd = "gnuplot '" + script_path + "' 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      // pngcairo may be missing from gnuplot-nox: fall back to the plain png terminal.
      if (ext == "png") {
        std::ofstream s(script_path);
        s << "set terminal png size 900,600\nset output '" << prefix << ".png'\n" << gp.str();
        s.close();
        if (std::system(cmd.c_str()) == 0) {
          std::remove(script_path.c_str());
          continue;
        }
      }
      log_warning("gnuplot failed to write " + prefix + "." + ext);
      ok = false;
    }
    std::remove(script_path.c_str());
  }
  std::remove(data_path.c_str());
  return ok;
}

}  // namespace stretch::eval
