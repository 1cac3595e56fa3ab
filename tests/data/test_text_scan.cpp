// fairseq's tokenisation and line ends on raw bytes (text_scan.h). Expected token lists are
// what Python's re.sub(r"\s+", " ", line).strip().split() gives (str.isspace() set) and what
// open(..., encoding="utf-8") line iteration gives (universal newlines).
#include <gtest/gtest.h>

#include "data/text_scan.h"

namespace stretch::data {
namespace {

struct Lines {
  std::vector<std::vector<std::string>> lines{{}};
  Utf8Report utf8;
};

Lines scan(const std::string& s, size_t begin = 0, size_t end = std::string::npos) {
  Lines out;
  if (end == std::string::npos) end = s.size();
  out.utf8 = scan_text_lines(reinterpret_cast<const uint8_t*>(s.data()), begin, end,
                             [&](std::string_view t) { out.lines.back().emplace_back(t); },
                             [&] { out.lines.emplace_back(); });
  out.lines.pop_back();  // the open line after the last line end
  return out;
}

using V = std::vector<std::string>;

TEST(TextScan, AsciiWhitespaceAndLineEnds) {
  const Lines l = scan("a b\n\tc\x0b" "d\x0c" "e \x1c" "f\x1dg\x1eh\x1fi\r\nj\rk\n\n  \nlast");
  ASSERT_EQ(l.lines.size(), 7u);
  EXPECT_EQ(l.lines[0], (V{"a", "b"}));
  EXPECT_EQ(l.lines[1], (V{"c", "d", "e", "f", "g", "h", "i"}));  // \v \f \x1c-\x1f are spaces
  EXPECT_EQ(l.lines[2], (V{"j"}));                                  // \r\n is one line end
  EXPECT_EQ(l.lines[3], (V{"k"}));                                  // a lone \r ends a line
  EXPECT_EQ(l.lines[4], V{});                                       // empty line
  EXPECT_EQ(l.lines[5], V{});                                       // whitespace-only line
  EXPECT_EQ(l.lines[6], (V{"last"}));                               // no final newline
  EXPECT_EQ(scan("x\n").lines.size(), 1u);                          // no empty line after the last \n
  EXPECT_EQ(scan("").lines.size(), 0u);
}

TEST(TextScan, UnicodeWhitespaceSplitsTokens) {
  // U+0085, U+00A0, U+1680, U+2000, U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 are
  // str.isspace(); U+200B (zero width space) and U+FEFF are not.
  const std::string s = "a\xc2\x85" "b\xc2\xa0" "c\xe1\x9a\x80" "d\xe2\x80\x80" "e\xe2\x80\x8a" "f\xe2\x80\xa8"
                        "g\xe2\x80\xa9" "h\xe2\x80\xaf" "i\xe2\x81\x9f" "j\xe3\x80\x80" "k\xe2\x80\x8bl\xef\xbb\xbfm";
  const Lines l = scan(s);
  ASSERT_EQ(l.lines.size(), 1u);
  EXPECT_EQ(l.lines[0], (V{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k\xe2\x80\x8bl\xef\xbb\xbfm"}));
  EXPECT_EQ(l.utf8.invalid_sequences, 0);
  EXPECT_EQ(tokenize_line("  caf\xc3\xa9\xc2\xa0 \xe4\xb8\xad  "), (std::vector<std::string_view>{"caf\xc3\xa9", "\xe4\xb8\xad"}));
}

TEST(TextScan, InvalidUtf8IsKeptAsBytesAndReported) {
  // A lone continuation byte, a truncated sequence, an overlong form, a surrogate, and a
  // truncated sequence at the very end: all stay inside their tokens, never split or crash.
  const std::string s = "ok \x80x y\xe2\x80 z\xc0\xaf w\xed\xa0\x80 \xc2";
  const Lines l = scan(s);
  ASSERT_EQ(l.lines.size(), 1u);
  EXPECT_EQ(l.lines[0], (V{"ok", "\x80x", "y\xe2\x80", "z\xc0\xaf", "w\xed\xa0\x80", "\xc2"}));
  EXPECT_GE(l.utf8.invalid_sequences, 6);
  EXPECT_EQ(l.utf8.first_offset, 3);
  // Every possible byte after a lead byte: no crash, tokens cover exactly the non-space bytes.
  for (int lead = 0x80; lead < 0x100; ++lead)
    for (int next = 0; next < 0x100; ++next) {
      std::string t = {'a', static_cast<char>(lead), static_cast<char>(next), 'b'};
      const Lines m = scan(t);
      size_t bytes = 0;
      for (const auto& line : m.lines)
        for (const auto& tok : line) bytes += tok.size();
      ASSERT_LE(bytes, t.size());
    }
}

TEST(TextScan, LineStartsAndRanges) {
  const std::string s = "ab\r\ncd\ref\n\ngh";
  const auto* d = reinterpret_cast<const uint8_t*>(s.data());
  EXPECT_TRUE(is_line_start(d, s.size(), 0, TokenMode::Text));
  EXPECT_FALSE(is_line_start(d, s.size(), 3, TokenMode::Text));  // between \r and \n
  EXPECT_TRUE(is_line_start(d, s.size(), 4, TokenMode::Text));
  EXPECT_TRUE(is_line_start(d, s.size(), 7, TokenMode::Text));   // after a lone \r
  EXPECT_FALSE(is_line_start(d, s.size(), 7, TokenMode::Byte));  // bytes: only \n ends lines
  EXPECT_EQ(align_to_line_start(d, s.size(), 3, TokenMode::Text), 4u);
  EXPECT_EQ(align_to_line_start(d, s.size(), 12, TokenMode::Text), s.size());
  // Any split into ranges gives the same lines as one scan.
  const Lines whole = scan(s);
  for (size_t n = 1; n <= s.size() + 2; ++n) {
    const auto b = split_at_line_starts(d, s.size(), n, TokenMode::Text);
    ASSERT_EQ(b.front(), 0u);
    ASSERT_EQ(b.back(), s.size());
    Lines parts;
    parts.lines.clear();
    for (size_t r = 0; r + 1 < b.size(); ++r) {
      ASSERT_LT(b[r], b[r + 1]);
      const Lines p = scan(s, b[r], b[r + 1]);
      parts.lines.insert(parts.lines.end(), p.lines.begin(), p.lines.end());
    }
    EXPECT_EQ(parts.lines, whole.lines) << n << " ranges";
  }
}

TEST(TextScan, ByteModeLines) {
  const std::string s = "a\r\n\n\xff";
  std::vector<std::vector<int>> lines{{}};
  scan_byte_lines(reinterpret_cast<const uint8_t*>(s.data()), 0, s.size(), [&](uint8_t b) { lines.back().push_back(b); },
                  [&] { lines.emplace_back(); });
  lines.pop_back();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], (std::vector<int>{'a', '\r'}));
  EXPECT_TRUE(lines[1].empty());
  EXPECT_EQ(lines[2], (std::vector<int>{0xff}));
}

}  // namespace
}  // namespace stretch::data
