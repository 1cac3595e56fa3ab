// Dictionary semantics on crafted inputs; expected values are worked out by hand from the
// fairseq rules in REFERENCE.md §4.1 (specials first, count descending, ties by ascending
// byte order, padding to a multiple of 8 with madeupwordNNNN).
#include <gtest/gtest.h>

#include "testing.h"

#include "core/error.h"
#include "data/binarizer.h"
#include "data/dictionary.h"
#include "data_test_util.h"

namespace stretch::data {
namespace {

using testing::TempDir;
using testing::write_file;

Dictionary build_from_text(const std::string& text, FinalizeParams f = {}) {
  TempDir dir;
  write_file(dir / "train.txt", text);
  MappedFile file = MappedFile::open(dir / "train.txt");
  return build_dictionary({&file}, ScanParams{}, f);
}

using stretch::testing::error_of;

TEST(Dictionary, SpecialsComeFirst) {
  Dictionary d;
  EXPECT_EQ(d.size(), 4);
  EXPECT_EQ(d.symbol(0), "<s>");
  EXPECT_EQ(d.symbol(1), "<pad>");
  EXPECT_EQ(d.symbol(2), "</s>");
  EXPECT_EQ(d.symbol(3), "<unk>");
  EXPECT_EQ(d.bos(), 0);
  EXPECT_EQ(d.pad(), 1);
  EXPECT_EQ(d.eos(), 2);
  EXPECT_EQ(d.unk(), 3);
  EXPECT_EQ(d.index("never-seen"), 3);
}

TEST(Dictionary, TiesBreakByByteOrderAndLiteralUnkGoesToSpecial) {
  // a, b, c each twice (a tie), x three times, <unk> and </s> literally once each.
  const Dictionary d = build_from_text("b a c x\nc b a <unk> x\nx </s>\n");
  // 4 specials + x, a, b, c = 8: already a multiple of 8, no padding.
  ASSERT_EQ(d.size(), 8);
  EXPECT_EQ(d.symbol(4), "x");
  EXPECT_EQ(d.symbol(5), "a");
  EXPECT_EQ(d.symbol(6), "b");
  EXPECT_EQ(d.symbol(7), "c");
  EXPECT_EQ(d.count(4), 3);
  EXPECT_EQ(d.count(5), 2);
  EXPECT_FALSE(d.contains("madeupword0000"));
  EXPECT_EQ(d.count(3), 1 + 1);  // <unk>: its initial 1 plus the literal one
  EXPECT_EQ(d.count(2), 1 + 3 + 1);  // </s>: initial 1, one per line (3), one literal
  EXPECT_EQ(d.to_text(), "x 3\na 2\nb 2\nc 2\n");
}

TEST(Dictionary, CodePointOrderForTiesAndPadding) {
  // "Zeta" (0x5A) < "zeta" (0x7A) < "\xc3\xa9t\xc3\xa9" (été, 0xC3...) < "中" (0xE4...).
  const Dictionary d = build_from_text("\xe4\xb8\xad \xc3\xa9t\xc3\xa9 zeta Zeta\n");
  ASSERT_EQ(d.size(), 8);
  EXPECT_EQ(d.symbol(4), "Zeta");
  EXPECT_EQ(d.symbol(5), "zeta");
  EXPECT_EQ(d.symbol(6), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(d.symbol(7), "\xe4\xb8\xad");
  const Dictionary e = build_from_text("q\n");
  ASSERT_EQ(e.size(), 8);  // 4 + q = 5, padded with madeupword0000..0002
  EXPECT_EQ(e.symbol(5), "madeupword0000");
  EXPECT_EQ(e.symbol(7), "madeupword0002");
  EXPECT_EQ(e.count(5), 0);
}

TEST(Dictionary, PaddingSkipsAMadeupwordThatIsAlreadyThere) {
  const Dictionary d = build_from_text("madeupword0000\n");
  // 4 + madeupword0000 (a real word, count 1) = 5; padding tries 0000 (exists), adds 0001..0003.
  ASSERT_EQ(d.size(), 8);
  EXPECT_EQ(d.symbol(4), "madeupword0000");
  EXPECT_EQ(d.count(4), 1);
  EXPECT_EQ(d.symbol(5), "madeupword0001");
  EXPECT_EQ(d.symbol(7), "madeupword0003");
}

TEST(Dictionary, ThresholdAndNwords) {
  const std::string text = "a a a a b b b c c d\n";
  Dictionary t = build_from_text(text, {.threshold = 2, .nwords = -1, .padding_factor = 1});
  EXPECT_EQ(t.size(), 4 + 3);  // a, b, c (d has 1 < 2)
  EXPECT_FALSE(t.contains("d"));
  Dictionary n = build_from_text(text, {.threshold = 0, .nwords = 6, .padding_factor = 1});
  EXPECT_EQ(n.size(), 6);  // nwords counts the 4 specials: a, b
  EXPECT_EQ(n.symbol(5), "b");
  Dictionary p = build_from_text(text, {.threshold = 0, .nwords = 6, .padding_factor = 4});
  EXPECT_EQ(p.size(), 8);
}

TEST(Dictionary, SaveLoadRoundTripAndHash) {
  TempDir dir;
  const Dictionary d = build_from_text("the cat sat on the mat\nthe dog\n");
  d.save(dir / "dict.txt");
  const Dictionary e = Dictionary::load(dir / "dict.txt");
  ASSERT_EQ(e.size(), d.size());
  for (int32_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(e.symbol(i), d.symbol(i));
    EXPECT_EQ(e.index(d.symbol(i)), i);
  }
  EXPECT_EQ(e.content_hash(), d.content_hash());
  EXPECT_EQ(d.content_hash().rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(d.content_hash().size(), 8u + 16u);
  Dictionary f = d;
  f.add_symbol("extra");
  EXPECT_NE(f.content_hash(), d.content_hash());
  // The hash depends on the order of symbols, not only on the set.
  const Dictionary g = Dictionary::parse("b 1\na 1\n", "g");
  const Dictionary h = Dictionary::parse("a 1\nb 1\n", "h");
  EXPECT_NE(g.content_hash(), h.content_hash());
}

TEST(Dictionary, TextIdsTextRoundTrip) {
  const Dictionary d = build_from_text("the cat sat on the mat\nthe dog ran\n");
  const std::vector<int32_t> ids = d.encode_line("the  dog\tsat on the mat ");
  ASSERT_EQ(ids.size(), 7u);
  EXPECT_EQ(ids.back(), d.eos());
  EXPECT_EQ(d.decode(ids), "the dog sat on the mat");
  EXPECT_EQ(d.decode(ids, Dictionary::EosInDecode::Keep), "the dog sat on the mat </s>");
  const std::vector<int32_t> oov = d.encode_line("the unicorn");
  EXPECT_EQ(oov[1], d.unk());
  EXPECT_EQ(d.decode(oov), "the <unk>");
}

TEST(Dictionary, ParseFormatDetails) {
  // Split at the last space: a symbol may contain spaces; trailing whitespace is stripped;
  // \r\n and \r end lines; the overwrite flag gives a duplicate a new id.
  const Dictionary d = Dictionary::parse("a b 5\r\nc 7  \rc 9 #fairseq:overwrite\n", "dict.txt");
  ASSERT_EQ(d.size(), 7);
  EXPECT_EQ(d.symbol(4), "a b");
  EXPECT_EQ(d.count(4), 5);
  EXPECT_EQ(d.symbol(5), "c");
  EXPECT_EQ(d.symbol(6), "c");
  EXPECT_EQ(d.index("c"), 6);
  EXPECT_EQ(d.count(6), 9);
}

TEST(Dictionary, BadLinesNameFileAndLine) {
  std::string e = error_of([] { Dictionary::parse("a 1\nbroken\n", "x/dict.txt"); });
  EXPECT_NE(e.find("x/dict.txt:2"), std::string::npos) << e;
  EXPECT_NE(e.find("no count"), std::string::npos) << e;
  e = error_of([] { Dictionary::parse("a 1\nb x1\n", "dict.txt"); });
  EXPECT_NE(e.find("dict.txt:2"), std::string::npos) << e;
  EXPECT_NE(e.find("not an integer"), std::string::npos) << e;
  e = error_of([] { Dictionary::parse("a 1\nb 2\na 3\n", "dict.txt"); });
  EXPECT_NE(e.find("dict.txt:3"), std::string::npos) << e;
  EXPECT_NE(e.find("duplicate symbol 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  EXPECT_NE(e.find("#fairseq:overwrite"), std::string::npos) << e;
  e = error_of([] { Dictionary::parse("<unk> 3\n", "dict.txt"); });
  EXPECT_NE(e.find("special"), std::string::npos) << e;
  e = error_of([] { Dictionary::parse("a 1\n\n", "dict.txt"); });  // a blank line has no count
  EXPECT_NE(e.find("dict.txt:2"), std::string::npos) << e;
  TempDir dir;
  write_file(dir / "empty.txt", "");
  e = error_of([&] { Dictionary::load(dir / "empty.txt"); });
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
  e = error_of([&] { Dictionary::load(dir / "missing.txt"); });
  EXPECT_NE(e.find("missing.txt: no such file"), std::string::npos) << e;
}

TEST(Dictionary, InvalidUtf8SymbolsAreByteStrings) {
  const Dictionary d = Dictionary::parse("ab\xff 4\n\xc3 2\n", "dict.txt");
  EXPECT_EQ(d.index("ab\xff"), 4);
  EXPECT_EQ(d.index("\xc3"), 5);
}

TEST(Dictionary, ByteLevelHelpers) {
  Dictionary d;
  for (int b : {104, 105, 10, 32}) d.add_symbol(std::to_string(b), 1);
  d.finalize({});
  EXPECT_TRUE(d.is_byte_level());
  const auto ids = d.byte_ids();
  EXPECT_EQ(d.symbol(ids['h']), "104");
  EXPECT_EQ(ids['z'], d.unk());
  EXPECT_EQ(d.decode_bytes({ids['h'], ids['i'], d.eos(), ids[' '], d.pad()}), "hi\n ");
  EXPECT_FALSE(build_from_text("the cat\n").is_byte_level());
  Dictionary z = Dictionary::parse("007 1\n", "z");  // not canonical decimal
  EXPECT_FALSE(z.is_byte_level());
}

}  // namespace
}  // namespace stretch::data
