// eval/word_output.cpp — see word_output.h.
#include "eval/word_output.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "data/dictionary.h"

namespace stretch::eval {

std::string bpe_marker(const std::string& post_process) {
  if (post_process.empty()) return "";
  if (post_process != "subword_nmt" && post_process != "@@ ")
    fail_usage("--post-process " + post_process + " is not implemented by eval-lm (fairseq 0.12.2 neither)",
               "give --post-process '@@ ' (or --remove-bpe '@@ ') for subword-nmt BPE, or leave it out");
  std::string m = post_process;
  while (!m.empty() && std::isspace(static_cast<unsigned char>(m.back()))) m.pop_back();  // Python's rstrip()
  return m;
}

WordOutput::WordOutput(const data::Dictionary& dict, WordOutputOptions options)
    : dict_(dict), options_(std::move(options)), marker_(bpe_marker(options_.post_process)) {
  if (marker_.empty()) return;
  is_piece_.assign(static_cast<size_t>(dict_.size()), 0);
  for (int64_t i = 0; i < dict_.size(); ++i) {
    const std::string& s = dict_.symbol(static_cast<int32_t>(i));
    is_piece_[static_cast<size_t>(i)] =
        s.size() >= marker_.size() && s.compare(s.size() - marker_.size(), marker_.size(), marker_) == 0;
  }
}

std::string WordOutput::add_block(int64_t id, const std::vector<TokenScore>& tokens) {
  const size_t n = tokens.size();
  std::vector<float> lp(n);
  for (size_t i = 0; i < n; ++i) lp[i] = tokens[i].log_prob;
  auto piece = [&](size_t i) { return !is_piece_.empty() && is_piece_[static_cast<size_t>(tokens[i].target)] != 0; };
  int64_t skipped = 0;
  for (size_t i = 0; i + 1 < n; ++i)
    if (piece(i)) {
      ++skipped;
      lp[i + 1] += lp[i];
      lp[i] = 0;
    }
  int64_t finite = 0;
  for (size_t i = 0; i < n; ++i)
    if (!std::isinf(lp[i])) {
      ++finite;
      score_sum_ += lp[i];
      if (!piece(i) || i + 1 == n) word_nll_.push_back(-static_cast<double>(lp[i]));
    }
  skipped_ += skipped;
  count_ += finite - skipped;
  if (!options_.word_probs && !options_.word_stats) return "";

  std::string line = options_.word_probs ? std::to_string(id) + " " : "";
  bool first = true;
  std::string w;
  bool is_bpe = false;
  for (size_t i = 0; i < n; ++i) {
    w += dict_.symbol(tokens[i].target);
    if (piece(i)) {
      w.resize(w.size() - marker_.size());
      is_bpe = true;
      continue;
    }
    if (options_.word_probs) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%f", static_cast<double>(lp[i]));
      line += (first ? "" : "\t") + w + " [" + buf + "]";
      first = false;
    }
    // The next scored position's value (fairseq: the first non-zero one after i).
    const float* next = nullptr;
    for (size_t j = i + 1; j < n; ++j)
      if (lp[j] != 0) {
        next = &lp[j];
        break;
      }
    auto [it, fresh] = stat_index_.try_emplace(w, stats_.size());
    if (fresh) stats_.push_back(Stat{.word = w, .is_bpe = is_bpe});
    Stat& s = stats_[it->second];
    if (next) {
      s.next_word_prob += *next;
      s.has_next = true;
    } else {
      ++s.missing_next;
    }
    s.log_prob += static_cast<double>(lp[i]);
    ++s.count;
    is_bpe = false;
    w.clear();
  }
  return options_.word_probs ? line : "";
}

std::vector<std::string> WordOutput::stats_lines() const {
  std::vector<std::string> out;
  if (!options_.word_stats) return out;
  std::vector<const Stat*> order;
  for (const Stat& s : stats_) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Stat* a, const Stat* b) { return a->count > b->count; });
  for (const Stat* s : order)
    out.push_back(s->word + "\t" + std::to_string(s->count) + "\t" + python_float_repr(s->log_prob) + "\t" +
                  (s->is_bpe ? "True" : "False") + "\t" + (s->has_next ? python_float_repr(static_cast<double>(s->next_word_prob)) : "0") +
                  "\t" + std::to_string(s->count - s->missing_next));
  return out;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);  // shortest round trip
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::atoi(sci.c_str() + e + 1);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char ch : mant)
    if (ch != '.') digits += ch;
  std::string out;
  if (exp < -4 || exp >= 16) {  // Python's repr switches to exponent notation here
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1, std::string::npos);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out.assign("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
  } else {
    const auto int_len = static_cast<size_t>(exp + 1);
    if (digits.size() <= int_len)
      out.assign(digits).append(int_len - digits.size(), '0').append(".0");
    else
      out.assign(digits, 0, int_len).append(1, '.').append(digits, int_len, std::string::npos);
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

}  // namespace stretch::eval
