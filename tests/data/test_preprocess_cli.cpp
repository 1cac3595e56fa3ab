// `stretch preprocess` end to end through the binary (build/bin/stretch): success, and each
// kind of bad input giving one clear error, a non-zero exit and no partial output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "data_test_util.h"

namespace stretch::data {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_stretch;
using testing::TempDir;
using testing::write_file;

std::string q(const std::string& s) { return "'" + s + "'"; }

// Nothing named like a staging directory is left next to dest.
bool no_staging_left(const fs::path& parent) {
  for (const auto& e : fs::directory_iterator(parent))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

class PreprocessCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_ / "train.txt", "the cat sat\nthe dog\n\n");
    write_file(dir_ / "valid.txt", "the bird sat\n");
  }
  std::string base_args(const std::string& dest) {
    return "preprocess --only-source --trainpref " + q(dir_ / "train.txt") + " --validpref " + q(dir_ / "valid.txt") +
           " --destdir " + q(dest);
  }
  TempDir dir_;
};

TEST_F(PreprocessCli, WritesAFairseqDataBin) {
  const auto r = run_stretch(base_args(dir_ / "out") + " --workers 2 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx", "preprocess.json"})
    EXPECT_TRUE(fs::is_regular_file(dir_ / ("out/" + std::string(f)))) << f;
  EXPECT_EQ(read_file(dir_ / "out/dict.txt"), "the 2\ncat 1\ndog 1\nsat 1\n");
  EXPECT_NE(r.output.find("train: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3 lines, 8 tokens, 0.000% replaced by <unk>"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 lines, 4 tokens, 25.000% replaced by <unk>"), std::string::npos) << r.output;
  EXPECT_TRUE(no_staging_left(dir_.path()));
  // Running again into the existing directory replaces the files; one worker, same bytes.
  const std::string bin = read_file(dir_ / "out/train.bin");
  const auto r2 = run_stretch(base_args(dir_ / "out") + " --workers 1");
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(read_file(dir_ / "out/train.bin"), bin);
  EXPECT_TRUE(no_staging_left(dir_.path()));
  // --srcdict reuses the dictionary.
  const auto r3 = run_stretch("preprocess --only-source --srcdict " + q(dir_ / "out/dict.txt") + " --testpref " +
                              q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out2"));
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  EXPECT_EQ(read_file(dir_ / "out2/dict.txt"), read_file(dir_ / "out/dict.txt"));
  EXPECT_EQ(read_file(dir_ / "out2/test.bin"), read_file(dir_ / "out/valid.bin"));
}

// fairseq's --dict-only: the dictionary a full run would write, and nothing binarized;
// --joined-dictionary has no meaning for language-model data and says so once.
TEST_F(PreprocessCli, DictOnlyAndJoinedDictionary) {
  const auto full = run_stretch(base_args(dir_ / "full"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto r = run_stretch(base_args(dir_ / "dict") + " --dict-only --joined-dictionary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(dir_ / "dict/dict.txt"), read_file(dir_ / "full/dict.txt"));
  for (const char* f : {"train.bin", "train.idx", "valid.bin", "valid.idx"})
    EXPECT_FALSE(fs::exists(dir_ / ("dict/" + std::string(f)))) << f;
  EXPECT_NE(r.output.find("(dict.txt, 0 split(s)"), std::string::npos) << r.output;
  const std::string note = "--joined-dictionary has no effect in stretch";
  const size_t at = r.output.find(note);
  EXPECT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(note, at + 1), std::string::npos) << "said more than once:\n" << r.output;
}

// Issue 17, defect 9: a second preprocess with another dictionary into the same --destdir, without
// --validpref, used to keep valid.{bin,idx} binarized with the old dictionary; train and eval-lm then
// read its ids with the new dict.txt. Now they are removed with a warning naming each; with the same
// dictionary (a --srcdict run adding a split) they are kept.
TEST_F(PreprocessCli, StaleSplitsOfAnotherDictionaryAreRemoved) {
  ASSERT_EQ(run_stretch(base_args(dir_ / "out")).exit_code, 0);
  ASSERT_TRUE(fs::is_regular_file(dir_ / "out/valid.bin"));
  // Same dictionary: a test split added with --srcdict keeps train and valid.
  const auto same = run_stretch("preprocess --only-source --srcdict " + q(dir_ / "out/dict.txt") + " --testpref " +
                                q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out"));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out/valid.bin"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out/test.idx"));
  EXPECT_EQ(same.output.find("removing"), std::string::npos) << same.output;
  // Another dictionary, train only: valid and test are removed, train and dict.txt replaced.
  write_file(dir_ / "train2.txt", "a b c d e\n");
  write_file(dir_ / "out/notes.bin", "kept: not a split name");
  const auto other = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "train2.txt") + " --destdir " +
                                 q(dir_ / "out"));
  ASSERT_EQ(other.exit_code, 0) << other.output;
  for (const char* f : {"valid.bin", "valid.idx", "test.bin", "test.idx"}) {
    EXPECT_FALSE(fs::exists(dir_ / ("out/" + std::string(f)))) << f;
    EXPECT_NE(other.output.find("removing " + (dir_ / ("out/" + std::string(f)))), std::string::npos)
        << other.output;
  }
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out/train.bin"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "out/notes.bin"));
  // The new dictionary: its five words, then fairseq's madeupword padding to a multiple of 8.
  const std::string new_dict = read_file(dir_ / "out/dict.txt");
  EXPECT_EQ(new_dict.substr(0, 20), "a 1\nb 1\nc 1\nd 1\ne 1\n") << new_dict;
  EXPECT_NE(new_dict.find("madeupword0000 0\n"), std::string::npos) << new_dict;
  EXPECT_TRUE(no_staging_left(dir_.path()));
}

// Issue 17: into an existing --destdir the new contents replace the old in one step
// (renameat2 RENAME_EXCHANGE of the staging directory, src/data/preprocess.cpp StagingDir::commit).
// A kill -9 just before the exchange leaves every old file byte for byte; the next run completes,
// removes the dead run's staging directory and carries over the files it does not write.
TEST_F(PreprocessCli, ReplacingAnExistingDestdirIsOneStep) {
  ASSERT_EQ(run_stretch(base_args(dir_ / "out")).exit_code, 0);
  write_file(dir_ / "out/notes.txt", "the user's file");
  fs::permissions(dir_ / "out", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir_ / "out")) before[e.path().filename().string()] = read_file(e.path().string());
  write_file(dir_ / "train2.txt", "a b c d e\n");
  const std::string again = "preprocess --only-source --trainpref " + q(dir_ / "train2.txt") + " --destdir " + q(dir_ / "out");
  ::setenv("STRETCH_TEST_PREPROCESS_KILL_BEFORE_EXCHANGE", "1", 1);
  const auto killed = run_stretch(again);
  ::unsetenv("STRETCH_TEST_PREPROCESS_KILL_BEFORE_EXCHANGE");
  // Killed by SIGKILL: -1 when the shell exec'd stretch, 137 (128 + 9) when it waited for it.
  ASSERT_TRUE(killed.exit_code == -1 || killed.exit_code == 137) << killed.exit_code << "\n" << killed.output;
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(dir_ / "out")) after[e.path().filename().string()] = read_file(e.path().string());
  EXPECT_EQ(after, before) << "a kill before the exchange changed --destdir";
  EXPECT_FALSE(no_staging_left(dir_.path())) << "the killed run's staging directory should still be there";
  const auto r = run_stretch(again);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(no_staging_left(dir_.path())) << r.output;
  EXPECT_EQ(read_file(dir_ / "out/notes.txt"), "the user's file");
  EXPECT_NE(read_file(dir_ / "out/train.bin"), before["train.bin"]);
  EXPECT_FALSE(fs::exists(dir_ / "out/valid.bin"));  // binarized with the replaced dictionary
  EXPECT_EQ(r.output.find("one by one"), std::string::npos) << r.output;  // not the fallback
  EXPECT_EQ(fs::status(dir_ / "out").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

TEST_F(PreprocessCli, MissingFile) {
  const auto r = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "nope.txt") + " --destdir " +
                             q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("stretch: error: " + dir_ / "nope.txt" + ": no such file (from --trainpref)"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // A missing valid file is found before anything is written.
  const auto r2 = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "train.txt") + " --validpref " +
                              q(dir_ / "nope.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(r2.exit_code, 1) << r2.output;
  EXPECT_NE(r2.output.find("(from --validpref)"), std::string::npos) << r2.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  EXPECT_TRUE(no_staging_left(dir_.path()));
}

TEST_F(PreprocessCli, EmptyFile) {
  write_file(dir_ / "empty.txt", "");
  const auto r = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "train.txt") + " --testpref " +
                             q(dir_ / "empty.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir_ / "empty.txt" + ": the file is empty (0 bytes; from --testpref)"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(PreprocessCli, DictionaryLineWithoutCount) {
  write_file(dir_ / "dict.txt", "the 3\ncat\n");
  const auto r = run_stretch("preprocess --only-source --srcdict " + q(dir_ / "dict.txt") + " --validpref " +
                             q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir_ / "dict.txt" + ":2: expected '<symbol> <count>', found 'cat' (no count)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hint:"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(PreprocessCli, DuplicateDictionarySymbol) {
  write_file(dir_ / "dict.txt", "the 3\ncat 2\nthe 1\n");
  const auto r = run_stretch("preprocess --only-source --srcdict " + q(dir_ / "dict.txt") + " --validpref " +
                             q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir_ / "dict.txt" + ":3: duplicate symbol 'the' (already id 4 from line 1)"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  write_file(dir_ / "dict.txt", "the 3\ncat 2\nthe 1 #fairseq:overwrite\n");
  const auto ok = run_stretch("preprocess --only-source --srcdict " + q(dir_ / "dict.txt") + " --validpref " +
                              q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST_F(PreprocessCli, InvalidUtf8IsDefinedBehaviour) {
  write_file(dir_ / "bad.txt", "good line\nbad \xff\xfe token\n\xc3\n");
  const auto r = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "bad.txt") + " --destdir " +
                             q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(dir_ / "bad.txt" + ": 3 byte(s) that are not valid UTF-8, the first at byte offset 14"),
            std::string::npos) << r.output;
  const std::string dict = read_file(dir_ / "out/dict.txt");
  EXPECT_NE(dict.find("\xff\xfe 1\n"), std::string::npos);
  EXPECT_NE(dict.find("\xc3 1\n"), std::string::npos);
}

TEST_F(PreprocessCli, UnwritableDestination) {
  write_file(dir_ / "afile", "x");
  // A destination below a regular file can never be created (works as root too).
  const auto r = run_stretch(base_args(dir_ / "afile/sub/out"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("stretch: error: " + dir_ / "afile/sub"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--destdir"), std::string::npos) << r.output;
  // A destination that is a file.
  const auto r2 = run_stretch(base_args(dir_ / "afile"));
  EXPECT_EQ(r2.exit_code, 1) << r2.output;
  EXPECT_NE(r2.output.find("--destdir exists and is not a directory"), std::string::npos) << r2.output;
  if (::geteuid() != 0) {  // permissions are not enforced for root
    fs::create_directory(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const auto r3 = run_stretch(base_args(dir_ / "ro/out"));
    EXPECT_EQ(r3.exit_code, 1) << r3.output;
    EXPECT_NE(r3.output.find("cannot write into " + dir_ / "ro"), std::string::npos) << r3.output;
    fs::permissions(dir_ / "ro", fs::perms::owner_all);
  }
  EXPECT_TRUE(no_staging_left(dir_.path()));
}

TEST_F(PreprocessCli, FlagsAndUsageErrors) {
  auto r = run_stretch(base_args(dir_ / "out") + " --no-such-flag");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--no-such-flag"), std::string::npos) << r.output;
  r = run_stretch(base_args(dir_ / "out") + " --dataset-impl lazy");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--dataset-impl: lazy is not allowed: only mmap"), std::string::npos) << r.output;
  r = run_stretch("preprocess --only-source --validpref " + q(dir_ / "valid.txt") + " --destdir " + q(dir_ / "out"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--trainpref is required"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(PreprocessCli, ByteLevel) {
  write_file(dir_ / "raw", std::string("ab\n\0\xff", 5));
  const auto r = run_stretch("preprocess --only-source --byte-level --trainpref " + q(dir_ / "raw") + " --destdir " +
                             q(dir_ / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Bytes 97, 98, 0, 255 once each and two lines: symbols sorted by count then byte order
  // of the decimal strings ("0" < "255" < "97" < "98"), padded to 8.
  EXPECT_EQ(read_file(dir_ / "out/dict.txt"), "0 1\n255 1\n97 1\n98 1\n");
  EXPECT_NE(r.output.find("2 lines, 6 tokens"), std::string::npos) << r.output;
}

// Seed 004's enwik8 preprocessing: prep_enwik8.py's text (each byte as its decimal value,
// space separated, a newline byte a real line break; scripts/data.sh enwik8 writes it) through
// the seed's command (--joined-dictionary) gives the same dictionary and ids as --byte-level on
// the raw bytes, and a dictionary eval-lm and train recognise as byte-level (bits per byte).
TEST_F(PreprocessCli, Enwik8TextOfTheSeedEqualsByteLevel) {
  const std::string raw = "<page>\n  <title>A\xc3\xa9</title>\n\n x\n";  // an empty line, a multi-byte character
  write_file(dir_ / "train.raw", raw);
  std::string text;  // ' '.join(str(c) if c != ord('\n') else '\n' for c in part)
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i) text += ' ';
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    text += c == '\n' ? std::string("\n") : std::to_string(c);
  }
  write_file(dir_ / "train.txt", text);
  auto r = run_stretch("preprocess --only-source --trainpref " + q(dir_ / "train.txt") + " --destdir " +
                       q(dir_ / "seed") + " --joined-dictionary --workers 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_stretch("preprocess --only-source --byte-level --trainpref " + q(dir_ / "train.raw") + " --destdir " +
                  q(dir_ / "bytes"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(dir_ / "seed/dict.txt"), read_file(dir_ / "bytes/dict.txt"));
  EXPECT_EQ(read_file(dir_ / "seed/train.bin"), read_file(dir_ / "bytes/train.bin"));
  EXPECT_EQ(read_file(dir_ / "seed/train.idx"), read_file(dir_ / "bytes/train.idx"));
  EXPECT_NE(read_file(dir_ / "seed/dict.txt").find("195 1\n"), std::string::npos);  // the bytes of 'é'
}

}  // namespace
}  // namespace stretch::data
