// data/text_scan.h — fairseq's line and token boundaries, on raw bytes, without allocation.
// Contract (REFERENCE.md §4.1-4.2, docs/formats.md "Tokenisation"):
//   TokenMode::Text  — lines end at "\n", "\r\n" or a lone "\r" (Python's universal newlines,
//     which fairseq's open(..., encoding="utf-8") uses). A token is a maximal run of
//     non-whitespace, where whitespace is exactly Python's str.isspace() set: ASCII
//     \t \n \v \f \r space, \x1c-\x1f, and the UTF-8 encodings of U+0085, U+00A0, U+1680,
//     U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (the same as fairseq's
//     SPACE_NORMALIZER \s+ then strip().split()). Tokens are byte strings: bytes that are not
//     valid UTF-8 are kept inside tokens as they are and counted (fairseq would stop with a
//     UnicodeDecodeError; stretch warns and goes on).
//   TokenMode::Byte  — enwik8-style byte-level data: every byte except '\n' is one token
//     (written as its decimal value in dict.txt), and each '\n' ends a line; this is what
//     fairseq sees after the standard prep_enwik8.py preparation.
// In both modes the last line counts even without a line terminator, and a file that ends
// with a terminator has no extra empty line after it.
// scan_lines() visits every line that starts in [begin, end), where begin and end are line
// starts (see align_to_line_start) or the file's ends; so splitting a file into byte ranges
// at line starts and scanning each gives exactly the lines of one whole-file scan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace stretch::data {

enum class TokenMode : uint8_t { Text, Byte };

// Counts of bytes that are not valid UTF-8 (Text mode), with the first one's file offset.
struct Utf8Report {
  int64_t invalid_sequences = 0;
  int64_t first_offset = -1;  // byte offset in the file, -1 if none
  void merge(const Utf8Report& o) {
    if (o.invalid_sequences && (first_offset < 0 || (o.first_offset >= 0 && o.first_offset < first_offset)))
      first_offset = o.first_offset;
    invalid_sequences += o.invalid_sequences;
  }
};

namespace scan_detail {
// Byte classes for the Text-mode scanner.
enum : uint8_t { kToken = 0, kSpace = 1, kNewline = 2, kReturn = 3, kHigh = 4 };
extern const uint8_t kClass[256];
// At p (p[0] >= 0x80, p < end): length of a valid UTF-8 sequence, or 0 if invalid. Sets
// *is_space to whether the code point is Python whitespace.
int utf8_sequence(const uint8_t* p, const uint8_t* end, bool* is_space);
}  // namespace scan_detail

// True if pos is a line start of data[size] (pos == 0, or just after a line end).
bool is_line_start(const uint8_t* data, size_t size, size_t pos, TokenMode mode);
// The first line start >= pos (or size).
size_t align_to_line_start(const uint8_t* data, size_t size, size_t pos, TokenMode mode);
// Split [0, size) into at most n_ranges byte ranges of about equal size whose boundaries are
// line starts. Returns the boundaries: [0, b1, ..., size] (fewer ranges if lines are long).
std::vector<size_t> split_at_line_starts(const uint8_t* data, size_t size, size_t n_ranges, TokenMode mode);

// Visit the lines starting in [begin, end) of data (the whole file, [0, size) bytes; only
// data[begin, end) is read):
//   Text mode: on_token(std::string_view) per token, on_line_end() after each line.
//   Byte mode: on_byte(uint8_t) per byte that is not '\n', on_line_end() after each line.
// Returns the invalid UTF-8 report for Text mode (offsets relative to data).
template <class OnToken, class OnLineEnd>
Utf8Report scan_text_lines(const uint8_t* data, size_t begin, size_t end, OnToken&& on_token,
                           OnLineEnd&& on_line_end) {
  using namespace scan_detail;
  Utf8Report report;
  const uint8_t* base = data;
  const uint8_t* p = data + begin;
  const uint8_t* e = data + end;
  while (p < e) {
    uint8_t cls = kClass[*p];
    if (cls == kSpace) { ++p; continue; }
    if (cls == kNewline) { on_line_end(); ++p; continue; }
    if (cls == kReturn) {
      on_line_end();
      ++p;
      if (p < e && *p == '\n') ++p;
      continue;
    }
    if (cls == kHigh) {
      bool space = false;
      int n = utf8_sequence(p, e, &space);
      if (space) { p += n; continue; }
    }
    // A token starts at p.
    const uint8_t* q = p;
    while (q < e) {
      uint8_t c = kClass[*q];
      if (c == kToken) { ++q; continue; }
      if (c != kHigh) break;
      bool space = false;
      int n = utf8_sequence(q, e, &space);
      if (n == 0) {
        if (report.invalid_sequences++ == 0) report.first_offset = q - base;
        ++q;
        continue;
      }
      if (space) break;
      q += n;
    }
    on_token(std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(q - p)));
    p = q;
  }
  if (end > begin && data[end - 1] != '\n' && data[end - 1] != '\r') on_line_end();
  return report;
}

template <class OnByte, class OnLineEnd>
void scan_byte_lines(const uint8_t* data, size_t begin, size_t end, OnByte&& on_byte, OnLineEnd&& on_line_end) {
  for (size_t i = begin; i < end; ++i) {
    if (data[i] == '\n') on_line_end();
    else on_byte(data[i]);
  }
  if (end > begin && data[end - 1] != '\n') on_line_end();
}

// fairseq's tokenize_line on one line (no line terminators inside): the tokens as views.
std::vector<std::string_view> tokenize_line(std::string_view line);

}  // namespace stretch::data
