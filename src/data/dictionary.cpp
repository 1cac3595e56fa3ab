// data/dictionary.cpp — see dictionary.h.
#include "data/dictionary.h"

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/mapped_file.h"
#include "data/text_scan.h"

namespace stretch::data {

namespace {

// Python's str.rstrip(): drop trailing whitespace (the str.isspace() set, UTF-8 encoded).
std::string_view rstrip_python_space(std::string_view s) {
  for (;;) {
    if (s.empty()) return s;
    const auto c = static_cast<uint8_t>(s.back());
    if (c < 0x80) {
      if (scan_detail::kClass[c] == scan_detail::kToken) return s;
      s.remove_suffix(1);
      continue;
    }
    // A multi-byte space ends here if a 2- or 3-byte sequence decodes to one.
    bool stripped = false;
    for (size_t n : {size_t{2}, size_t{3}}) {
      if (s.size() < n) continue;
      const auto* p = reinterpret_cast<const uint8_t*>(s.data() + s.size() - n);
      bool space = false;
      if (p[0] >= 0x80 && scan_detail::utf8_sequence(p, p + n, &space) == static_cast<int>(n) && space) {
        s.remove_suffix(n);
        stripped = true;
        break;
      }
    }
    if (!stripped) return s;
  }
}

// Python int() on a count field: optional surrounding ASCII whitespace, sign, decimal digits.
bool parse_count(std::string_view f, int64_t* out) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
  bool neg = false;
  if (!f.empty() && (f.front() == '+' || f.front() == '-')) {
    neg = f.front() == '-';
    f.remove_prefix(1);
  }
  if (f.empty() || f.size() > 18) return false;
  int64_t v = 0;
  for (char c : f) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = neg ? -v : v;
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    auto u = static_cast<uint8_t>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (s.size() > 80) out += "...";
  return out;
}

}  // namespace

Dictionary::Dictionary() {
  for (const char* s : {"<s>", "<pad>", "</s>", "<unk>"}) add_symbol(s, 1);
}

int32_t Dictionary::add_symbol(std::string_view word, int64_t count, AddMode mode) {
  if (mode == AddMode::Accumulate) {
    const int32_t found = table_.find(word, symbols_);
    if (found != SymbolTable::kNotFound) {
      counts_[static_cast<size_t>(found)] += count;
      return found;
    }
  }
  const auto id = static_cast<int32_t>(symbols_.size());
  symbols_.emplace_back(word);  // word may point into symbols_: use the copy from here on
  counts_.push_back(count);
  table_.assign(symbols_.back(), id, symbols_);
  return id;
}

const std::string& Dictionary::symbol(int32_t id) const {
  if (id < 0 || id >= size())
    fail_input("dictionary", "id " + std::to_string(id) + " is outside [0, " + std::to_string(size()) + ")",
               "the data was binarized with a different dictionary");
  return symbols_[static_cast<size_t>(id)];
}

Dictionary Dictionary::load(const std::string& path) {
  MappedFile f = MappedFile::open(path, "dictionary");
  if (f.size() == 0)
    fail_input(path, "the dictionary file is empty",
               "a dict.txt has one '<symbol> <count>' line per symbol; rebuild it with stretch preprocess");
  return parse(f.view(), path);
}

Dictionary Dictionary::parse(std::string_view text, const std::string& path) {
  Dictionary d;
  std::vector<int64_t> first_line(static_cast<size_t>(kNumSpecial), 0);  // line of each id, 0 = special
  size_t pos = 0;
  int64_t lineno = 0;
  while (pos < text.size()) {
    // Universal newlines, as Python's readlines() in text mode.
    size_t e = pos;
    while (e < text.size() && text[e] != '\n' && text[e] != '\r') ++e;
    std::string_view line = text.substr(pos, e - pos);
    pos = e;
    if (pos < text.size()) pos += (text[pos] == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') ? 2 : 1;
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno);
    const std::string hint = "each line of a dict.txt is '<symbol> <count>' (one space before the count), "
                             "optionally followed by ' " + std::string(kOverwriteFlag) + "'";
    std::string_view s = rstrip_python_space(line);
    size_t sp = s.rfind(' ');
    if (sp == std::string_view::npos)
      fail_input(where, "expected '<symbol> <count>', found '" + printable(line) + "' (no count)", hint);
    std::string_view word = s.substr(0, sp), field = s.substr(sp + 1);
    bool overwrite = false;
    if (field == kOverwriteFlag) {
      overwrite = true;
      sp = word.rfind(' ');
      if (sp == std::string_view::npos)
        fail_input(where, "expected '<symbol> <count> " + std::string(kOverwriteFlag) + "', found '" +
                              printable(line) + "' (no count)", hint);
      field = word.substr(sp + 1);
      word = word.substr(0, sp);
    }
    int64_t count = 0;
    if (!parse_count(field, &count))
      fail_input(where, "the count '" + printable(field) + "' of symbol '" + printable(word) + "' is not an integer", hint);
    if (!overwrite) {
      const int32_t found = d.table_.find(word, d.symbols_);
      if (found != SymbolTable::kNotFound) {
        const int64_t at = first_line[static_cast<size_t>(found)];
        fail_input(where, "duplicate symbol '" + printable(word) + "' (already id " + std::to_string(found) +
                              (at ? " from line " + std::to_string(at) : std::string(", a special symbol")) + ")",
                   "remove the line, or end it with ' " + std::string(kOverwriteFlag) +
                       "' to give the symbol a new id as fairseq does");
      }
    }
    d.add_symbol(word, count, overwrite ? AddMode::Overwrite : AddMode::Accumulate);
    first_line.push_back(lineno);
  }
  return d;
}

std::string Dictionary::to_text() const {
  std::string out;
  for (size_t i = kNumSpecial; i < symbols_.size(); ++i) {
    out += symbols_[i];
    out += ' ';
    out += std::to_string(counts_[i]);
    out += '\n';
  }
  return out;
}

void Dictionary::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail_io(path, "cannot create the dictionary file", "check that the directory exists and is writable");
  const std::string text = to_text();
  errno = 0;
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f)
    fail_io(path, std::string("write failed: ") + (errno ? std::strerror(errno) : "the stream reported an error"),
            "is the disk full?");
}

void Dictionary::finalize(const FinalizeParams& p) {
  const int64_t nwords = p.nwords <= 0 ? size() : p.nwords;
  // Non-special (symbol, count) pairs, sorted by symbol (then count) as Python's sorted(zip())
  // does; a symbol repeated through overwrite keeps its last (largest-count) entry, like dict().
  std::vector<std::pair<std::string, int64_t>> rest;
  rest.reserve(symbols_.size());
  for (size_t i = kNumSpecial; i < symbols_.size(); ++i) rest.emplace_back(symbols_[i], counts_[i]);
  std::sort(rest.begin(), rest.end());
  std::vector<std::pair<std::string, int64_t>> unique;
  unique.reserve(rest.size());
  for (auto& r : rest) {
    if (!unique.empty() && unique.back().first == r.first) unique.back() = std::move(r);
    else unique.push_back(std::move(r));
  }
  std::stable_sort(unique.begin(), unique.end(), [](const auto& a, const auto& b) { return a.second > b.second; });

  std::vector<std::string> symbols(symbols_.begin(), symbols_.begin() + kNumSpecial);
  std::vector<int64_t> counts(counts_.begin(), counts_.begin() + kNumSpecial);
  const int64_t keep = std::max<int64_t>(0, nwords - kNumSpecial);
  for (int64_t i = 0; i < keep && i < static_cast<int64_t>(unique.size()); ++i) {
    if (unique[static_cast<size_t>(i)].second < p.threshold) break;
    symbols.push_back(std::move(unique[static_cast<size_t>(i)].first));
    counts.push_back(unique[static_cast<size_t>(i)].second);
  }
  symbols_ = std::move(symbols);
  counts_ = std::move(counts);
  table_.clear();
  for (size_t i = 0; i < symbols_.size(); ++i) table_.assign(symbols_[i], static_cast<int32_t>(i), symbols_);

  if (p.padding_factor > 1) {
    for (int i = 0; size() % p.padding_factor != 0; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "madeupword%04d", i);
      add_symbol(name, 0);
    }
  }
}

std::vector<int32_t> Dictionary::encode_line(std::string_view line) const {
  std::vector<int32_t> ids;
  for (std::string_view t : tokenize_line(line)) ids.push_back(index(t));
  ids.push_back(kEos);
  return ids;
}

std::string Dictionary::decode(const std::vector<int32_t>& ids, EosInDecode eos) const {
  std::string out;
  for (int32_t id : ids) {
    if (id == kPad || (id == kEos && eos == EosInDecode::Skip)) continue;
    if (!out.empty()) out += ' ';
    out += symbol(id);
  }
  return out;
}

std::array<int32_t, 256> Dictionary::byte_ids() const {
  std::array<int32_t, 256> t{};
  for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = index(std::to_string(b));
  return t;
}

namespace {
int byte_value(std::string_view s) {  // "0".."255" in canonical form, else -1
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v <= 255 ? v : -1;
}
}  // namespace

bool Dictionary::is_byte_level() const {
  int bytes = 0;
  for (size_t i = kNumSpecial; i < symbols_.size(); ++i) {
    if (byte_value(symbols_[i]) >= 0) ++bytes;
    else if (symbols_[i].rfind("madeupword", 0) != 0) return false;
  }
  return bytes > 0;
}

std::string Dictionary::decode_bytes(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id == kPad) continue;
    if (id == kEos) { out += '\n'; continue; }
    const int v = byte_value(symbol(id));
    if (v < 0)
      fail_input("dictionary", "id " + std::to_string(id) + " ('" + printable(symbol(id)) + "') is not a byte value",
                 "decode_bytes needs a byte-level dictionary (stretch preprocess --byte-level)");
    out += static_cast<char>(v);
  }
  return out;
}

std::string Dictionary::content_hash() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  auto mix = [&h](uint8_t b) { h = (h ^ b) * 0x100000001b3ull; };
  for (const auto& s : symbols_) {
    uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) mix(static_cast<uint8_t>(n >> (8 * i)));
    for (char c : s) mix(static_cast<uint8_t>(c));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace stretch::data
