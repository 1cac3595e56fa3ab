// Binarization (binarizer.h, preprocess.h): workers give byte-identical output, text -> ids
// -> text round trips, byte-level mode equals fairseq on prep_enwik8-style text, and the
// published corpus counts (REFERENCE.md §4.1, ../shared/data/README.md) come out.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "data/binarizer.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "data_test_util.h"

namespace stretch::data {
namespace {

using testing::corpus;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

// A corpus with every line-end style, Unicode spaces, invalid bytes, empty lines.
std::string synthetic_corpus(size_t lines, uint32_t seed) {
  std::mt19937 rng(seed);
  const char* words[] = {"the", "a", "cat", "<unk>", "\xc3\xa9t\xc3\xa9", "\xe4\xb8\xad", "x\xff", "dog", "</s>", "z"};
  const char* seps[] = {" ", "  ", "\t", "\xc2\xa0", "\xe3\x80\x80", "\x0b"};
  const char* ends[] = {"\n", "\r\n", "\r", "\n\n", " \n"};
  std::string s;
  for (size_t i = 0; i < lines; ++i) {
    const int n = static_cast<int>(rng() % 12);
    for (int w = 0; w < n; ++w) {
      if (w) s += seps[rng() % 6];
      s += words[rng() % 10];
    }
    s += ends[rng() % 5];
  }
  s += "tail without newline";
  return s;
}

TEST(Binarize, WorkersGiveByteIdenticalOutput) {
  TempDir dir;
  write_file(dir / "train.txt", synthetic_corpus(20000, 1));
  MappedFile file = MappedFile::open(dir / "train.txt");
  const Dictionary d1 = build_dictionary({&file}, ScanParams{.workers = 1}, {});
  const Dictionary d3 = build_dictionary({&file}, ScanParams{.workers = 3, .range_bytes = 1000}, {});
  EXPECT_EQ(d1.to_text(), d3.to_text());
  std::string ref_bin, ref_idx;
  BinarizeStats ref{};
  const ScanParams configs[] = {{.workers = 1}, {.workers = 2}, {.workers = 2, .range_bytes = 777}, {.workers = 3, .range_bytes = 64}};
  for (size_t i = 0; i < std::size(configs); ++i) {
    const std::string prefix = dir / ("out" + std::to_string(i));
    IndexedDatasetWriter w(prefix, dtype_for_vocab(d1.size()));
    const BinarizeStats st = binarize_file(file, d1, configs[i], w);
    w.finish();
    if (i == 0) {
      ref_bin = read_file(prefix + ".bin");
      ref_idx = read_file(prefix + ".idx");
      ref = st;
      EXPECT_GT(st.lines, 20000);
      EXPECT_GT(st.utf8.invalid_sequences, 0);  // "x\xff"
      continue;
    }
    EXPECT_EQ(read_file(prefix + ".bin"), ref_bin) << "config " << i;
    EXPECT_EQ(read_file(prefix + ".idx"), ref_idx) << "config " << i;
    EXPECT_EQ(st.lines, ref.lines);
    EXPECT_EQ(st.tokens, ref.tokens);
    EXPECT_EQ(st.utf8.invalid_sequences, ref.utf8.invalid_sequences);
    EXPECT_EQ(st.utf8.first_offset, ref.utf8.first_offset);
  }
}

TEST(Binarize, ItemsAndReplacedCount) {
  const Dictionary d = Dictionary::parse("a 5\nb 3\n", "dict.txt");
  BinarizeStats st;
  const auto items = binarize_text("a b\n\n  \nc <unk> a\r\nb", d, TokenMode::Text, &st);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0], (std::vector<int32_t>{4, 5, 2}));
  EXPECT_EQ(items[1], (std::vector<int32_t>{2}));  // empty line
  EXPECT_EQ(items[2], (std::vector<int32_t>{2}));  // whitespace-only line
  EXPECT_EQ(items[3], (std::vector<int32_t>{3, 3, 4, 2}));
  EXPECT_EQ(items[4], (std::vector<int32_t>{5, 2}));
  EXPECT_EQ(st.lines, 5);
  EXPECT_EQ(st.tokens, 11);
  EXPECT_EQ(st.replaced, 1);  // "c" only: the literal <unk> is not a replacement
}

// The standard enwik8 preparation (prep_enwik8.py), written independently here: each byte
// as its decimal value joined by single spaces, with newline bytes kept as "\n".
std::string prepare_enwik8_style(const std::string& raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i) out += ' ';
    const auto b = static_cast<uint8_t>(raw[i]);
    out += b == '\n' ? std::string("\n") : std::to_string(b);
  }
  return out;
}

TEST(Binarize, ByteLevelEqualsTextModeOnPreparedBytes) {
  TempDir dir;
  std::string raw;
  for (int b = 0; b < 256; ++b) raw += static_cast<char>(b);
  raw += "\n\nHello, world\r\n\xe2\x80\xa8\xc2\xa0 \x1c\n";
  for (int i = 0; i < 3000; ++i) raw += static_cast<char>((i * 37) % 256);
  if (const std::string e5 = corpus("enwik8/enwik5"); !e5.empty()) raw += read_file(e5);
  write_file(dir / "raw", raw);
  write_file(dir / "prepared.txt", prepare_enwik8_style(raw));
  PreprocessConfig byte_cfg;
  byte_cfg.trainpref = dir / "raw";
  byte_cfg.validpref = dir / "raw";
  byte_cfg.destdir = dir / "bytes";
  byte_cfg.mode = TokenMode::Byte;
  byte_cfg.workers = 2;
  preprocess(byte_cfg);
  PreprocessConfig text_cfg = byte_cfg;
  text_cfg.trainpref = dir / "prepared.txt";
  text_cfg.validpref = dir / "prepared.txt";
  text_cfg.destdir = dir / "text";
  text_cfg.mode = TokenMode::Text;
  preprocess(text_cfg);
  EXPECT_EQ(read_file(dir / "bytes/dict.txt"), read_file(dir / "text/dict.txt"));
  for (const char* f : {"train.bin", "train.idx", "valid.bin", "valid.idx"})
    EXPECT_EQ(read_file(dir / ("bytes/" + std::string(f))), read_file(dir / ("text/" + std::string(f)))) << f;
  // Tokens = bytes, with each newline byte as </s> (+1 </s> as the raw data does not end in "\n").
  auto ds = IndexedDataset::open(dir / "bytes/train");
  EXPECT_EQ(ds->total_tokens(), static_cast<int64_t>(raw.size()) + (raw.back() == '\n' ? 0 : 1));
  const Dictionary d = Dictionary::load(dir / "bytes/dict.txt");
  EXPECT_TRUE(d.is_byte_level());
  std::string back;
  for (int64_t i = 0; i < ds->num_items(); ++i) back += d.decode_bytes(ds->item(i));
  EXPECT_EQ(back, raw + (raw.back() == '\n' ? "" : "\n"));
}

TEST(Binarize, PtbCountsAndDictionary) {
  const std::string train = corpus("ptb/ptb.train.txt"), valid = corpus("ptb/ptb.valid.txt"),
                    test = corpus("ptb/ptb.test.txt");
  if (train.empty() || valid.empty() || test.empty())
    GTEST_SKIP() << "PTB not found under STRETCH_DATA_DIR=" << STRETCH_DATA_DIR;
  TempDir dir;
  PreprocessConfig cfg;
  cfg.trainpref = train;
  cfg.validpref = valid;
  cfg.testpref = test;
  cfg.destdir = dir / "ptb";
  cfg.workers = 2;
  const PreprocessReport r = preprocess(cfg);
  ASSERT_EQ(r.splits.size(), 3u);
  // Published counts, </s> included (REFERENCE.md, ../shared/data/README.md).
  EXPECT_EQ(r.splits[0].stats.tokens, 929589);
  EXPECT_EQ(r.splits[1].stats.tokens, 73760);
  EXPECT_EQ(r.splits[2].stats.tokens, 82430);
  EXPECT_EQ(r.splits[0].stats.lines, 42068);
  EXPECT_EQ(r.splits[1].stats.lines, 3370);
  EXPECT_EQ(r.splits[2].stats.lines, 3761);
  for (const auto& s : r.splits) EXPECT_EQ(s.stats.replaced, 0) << s.name;  // a closed vocabulary
  // Mikolov's PTB has a 10,000-symbol vocabulary counting <unk> and <eos>: 9,999 word types
  // including <unk>. fairseq: 4 specials + 9,998 other words = 10,002, padded to 10,008.
  EXPECT_EQ(r.dict_size, 10008);
  const Dictionary d = Dictionary::load(dir / "ptb/dict.txt");
  EXPECT_EQ(d.size(), 10008);
  EXPECT_EQ(d.symbol(4), "the");
  EXPECT_EQ(d.symbol(10001), "wachter");  // the last word (count 1, last in byte order)
  EXPECT_EQ(d.symbol(10002), "madeupword0000");
  EXPECT_EQ(d.symbol(10007), "madeupword0005");
  EXPECT_LT(d.count(3), 50000);  // <unk> is a special, not a counted word
  // text -> ids -> text: every valid line comes back with its whitespace normalised.
  auto ds = IndexedDataset::open(dir / "ptb/valid");
  ds->validate_ids(d.size());
  const std::string text = read_file(valid);
  size_t pos = 0;
  for (int64_t i = 0; i < ds->num_items(); ++i) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    std::string norm;
    for (std::string_view t : tokenize_line(line)) {
      if (!norm.empty()) norm += ' ';
      norm += t;
    }
    ASSERT_EQ(d.decode(ds->item(i)), norm) << "line " << i + 1;
    pos = nl + 1;
  }
}

TEST(Binarize, WikiText103ValidTestCounts) {
  const std::string valid = corpus("wikitext-103/wiki.valid.tokens"), test = corpus("wikitext-103/wiki.test.tokens");
  if (valid.empty() || test.empty()) GTEST_SKIP() << "WikiText-103 valid/test not found under " << STRETCH_DATA_DIR;
  TempDir dir;
  PreprocessConfig cfg;
  cfg.trainpref = valid;  // no train split here; the dictionary comes from valid
  cfg.validpref = valid;
  cfg.testpref = test;
  cfg.destdir = dir / "wt";
  const PreprocessReport r = preprocess(cfg);
  EXPECT_EQ(r.splits[1].stats.tokens, 217646);  // WikiText-103 paper count, one </s> per line
  EXPECT_EQ(r.splits[2].stats.tokens, 245569);  // fairseq truncated_bptt README "Evaluated 245569 tokens"
  EXPECT_EQ(r.splits[1].stats.lines, 3760);
  EXPECT_EQ(r.splits[2].stats.lines, 4358);
  EXPECT_EQ(r.splits[1].stats.replaced, 0);
  EXPECT_GT(r.splits[2].stats.replaced, 0);  // test words never seen in valid
}

}  // namespace
}  // namespace stretch::data
