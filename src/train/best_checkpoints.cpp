// train/best_checkpoints.cpp — see best_checkpoints.h.
#include "train/best_checkpoints.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string_view>
#include <utility>

#include "data/numpy_random.h"

namespace stretch::train {
namespace fs = std::filesystem;
namespace {

constexpr int kHashBits = 61;
constexpr uint64_t kHashModulus = (uint64_t{1} << kHashBits) - 1;  // CPython's _PyHASH_MODULUS
constexpr int64_t kHashInf = 314159;

// A regular expression matching `text` literally.
std::string regex_literal(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

// The files checkpoint.best_<metric>_<value><suffix>.pt of save_dir, as fairseq's checkpoint_paths
// reads them: the value (with the tie digit glued on) and the path, largest value first. (fairseq
// puts the suffix into its pattern unescaped; here it is matched literally.)
std::vector<std::pair<double, fs::path>> best_files(const KeepBestParams& p) {
  std::vector<std::pair<double, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(p.save_dir, ec)) return out;
  const std::regex pattern("checkpoint\\.best_" + p.metric + "_(\\d+\\.?\\d*)" + regex_literal(p.suffix) + "\\.pt");
  for (const auto& e : fs::directory_iterator(p.save_dir, ec)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (std::regex_match(name, m, pattern)) out.emplace_back(std::strtod(m[1].str().c_str(), nullptr), e.path());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.filename() > b.second.filename();
  });
  return out;
}

}  // namespace

int64_t python_hash_int(int64_t v) {
  const uint64_t a = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  int64_t h = static_cast<int64_t>(a % kHashModulus);
  if (v < 0) h = -h;
  return h == -1 ? -2 : h;
}

int64_t python_hash_float(double v) {
  if (std::isinf(v)) return v > 0 ? kHashInf : -kHashInf;
  int e = 0;
  double m = std::frexp(v, &e);
  int sign = 1;
  if (m < 0) sign = -1, m = -m;
  uint64_t x = 0;
  while (m != 0) {  // 28 bits at a time
    x = ((x << 28) & kHashModulus) | x >> (kHashBits - 28);
    m *= 268435456.0;
    e -= 28;
    const auto y = static_cast<uint64_t>(m);
    m -= static_cast<double>(y);
    x += y;
    if (x >= kHashModulus) x -= kHashModulus;
  }
  e = e >= 0 ? e % kHashBits : kHashBits - 1 - ((-1 - e) % kHashBits);
  x = ((x << e) & kHashModulus) | x >> (kHashBits - e);
  x = x * static_cast<uint64_t>(static_cast<int64_t>(sign));
  if (x == static_cast<uint64_t>(-1)) x = static_cast<uint64_t>(-2);
  return static_cast<int64_t>(x);
}

int64_t python_hash_tuple(const std::vector<int64_t>& item_hashes) {
  constexpr uint64_t p1 = 11400714785074694791ULL, p2 = 14029467366897019727ULL, p5 = 2870177450012600261ULL;
  uint64_t acc = p5;
  for (int64_t h : item_hashes) {
    acc += static_cast<uint64_t>(h) * p2;
    acc = (acc << 31) | (acc >> 33);
    acc *= p1;
  }
  acc += static_cast<uint64_t>(item_hashes.size()) ^ (p5 ^ 3527539ULL);
  if (acc == static_cast<uint64_t>(-1)) return 1546275796;
  return static_cast<int64_t>(acc);
}

int64_t best_checkpoint_suffix(int64_t epoch, int64_t updates, double value, int64_t keep) {
  const int64_t h = python_hash_tuple({python_hash_int(epoch), python_hash_int(updates), python_hash_float(value)});
  double r = std::fmod(static_cast<double>(h), 1e6);  // Python's int % float: the divisor's sign
  if (r < 0) r += 1e6;
  data::NumpyRandomState rng(static_cast<uint32_t>(r));
  return static_cast<int64_t>(rng.interval(static_cast<uint64_t>(keep - 1)));
}

std::string keep_best_name(const KeepBestParams& p, int64_t epoch, int64_t updates, double value, double best) {
  if (p.keep <= 0 || std::isnan(value)) return "";
  double worst = best;
  const auto files = best_files(p);
  if (!files.empty()) worst = p.maximize ? files.back().first : files.front().first;
  const bool write = p.maximize ? value >= worst : value <= worst;
  if (!write) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f%lld", value,
                static_cast<long long>(best_checkpoint_suffix(epoch, updates, value, p.keep)));
  return "checkpoint.best_" + p.metric + "_" + buf + ".pt";
}

void prune_best(const KeepBestParams& p) {
  if (p.keep <= 0) return;
  auto files = best_files(p);  // largest first
  if (!p.maximize) std::reverse(files.begin(), files.end());
  std::error_code ec;
  for (size_t i = static_cast<size_t>(p.keep); i < files.size(); ++i) fs::remove(files[i].second, ec);
}

}  // namespace stretch::train
