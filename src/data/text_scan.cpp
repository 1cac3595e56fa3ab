// data/text_scan.cpp — see text_scan.h.
#include "data/text_scan.h"

#include <array>

namespace stretch::data {
namespace scan_detail {

namespace {
constexpr std::array<uint8_t, 256> make_class_table() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = c >= 0x80 ? kHigh : kToken;
  for (int c : {0x09, 0x0b, 0x0c, 0x20, 0x1c, 0x1d, 0x1e, 0x1f}) t[static_cast<size_t>(c)] = kSpace;
  t['\n'] = kNewline;
  t['\r'] = kReturn;
  return t;
}
constexpr std::array<uint8_t, 256> kTable = make_class_table();

bool is_python_space(uint32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
}  // namespace

const uint8_t kClass[256] = {
#define R(i) kTable[i], kTable[i + 1], kTable[i + 2], kTable[i + 3], kTable[i + 4], kTable[i + 5], kTable[i + 6], kTable[i + 7]
    R(0),   R(8),   R(16),  R(24),  R(32),  R(40),  R(48),  R(56),  R(64),  R(72),  R(80),
    R(88),  R(96),  R(104), R(112), R(120), R(128), R(136), R(144), R(152), R(160), R(168),
    R(176), R(184), R(192), R(200), R(208), R(216), R(224), R(232), R(240), R(248)
#undef R
};

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
int utf8_sequence(const uint8_t* p, const uint8_t* end, bool* is_space) {
  *is_space = false;
  const uint8_t c0 = p[0];
  int n;
  uint32_t cp;
  if (c0 >= 0xC2 && c0 <= 0xDF) { n = 2; cp = c0 & 0x1F; }
  else if (c0 >= 0xE0 && c0 <= 0xEF) { n = 3; cp = c0 & 0x0F; }
  else if (c0 >= 0xF0 && c0 <= 0xF4) { n = 4; cp = c0 & 0x07; }
  else return 0;  // continuation byte, overlong lead C0/C1, or F5..FF
  if (end - p < n) return 0;
  for (int i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  *is_space = is_python_space(cp);
  return n;
}

}  // namespace scan_detail

bool is_line_start(const uint8_t* data, size_t size, size_t pos, TokenMode mode) {
  if (pos == 0 || pos >= size) return true;
  const uint8_t prev = data[pos - 1];
  if (prev == '\n') return true;
  if (mode == TokenMode::Text && prev == '\r') return data[pos] != '\n';  // "\r\n" is one line end
  return false;
}

size_t align_to_line_start(const uint8_t* data, size_t size, size_t pos, TokenMode mode) {
  while (pos < size && !is_line_start(data, size, pos, mode)) ++pos;
  return pos < size ? pos : size;
}

std::vector<size_t> split_at_line_starts(const uint8_t* data, size_t size, size_t n_ranges, TokenMode mode) {
  std::vector<size_t> bounds{0};
  if (n_ranges == 0) n_ranges = 1;
  for (size_t k = 1; k < n_ranges; ++k) {
    size_t target = static_cast<size_t>(static_cast<unsigned __int128>(size) * k / n_ranges);
    size_t b = align_to_line_start(data, size, std::max(target, bounds.back()), mode);
    if (b > bounds.back() && b < size) bounds.push_back(b);
  }
  bounds.push_back(size);
  return bounds;
}

std::vector<std::string_view> tokenize_line(std::string_view line) {
  std::vector<std::string_view> out;
  const auto* d = reinterpret_cast<const uint8_t*>(line.data());
  scan_text_lines(d, 0, line.size(), [&](std::string_view t) { out.push_back(t); }, [] {});
  return out;
}

}  // namespace stretch::data
