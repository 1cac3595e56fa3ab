// data/preprocess.h — `stretch preprocess`: fairseq-preprocess --only-source, as a library call.
// Contract (REFERENCE.md §4.1-4.2; docs/formats.md):
//   * Reads --trainpref/--validpref/--testpref files (valid/test may be comma-separated lists,
//     written as valid, valid1, valid2, … as fairseq does), builds the dictionary from the
//     training file (or loads --srcdict), and writes DESTDIR/dict.txt and
//     DESTDIR/{train,valid,test}.{bin,idx} in fairseq's MMIDIDX format, plus
//     DESTDIR/preprocess.json (stretch's own record: mode, dictionary hash, per-split counts;
//     fairseq ignores it).
//   * All inputs are opened and checked before anything is written. Output goes to a fresh
//     temporary directory next to DESTDIR and is moved into place only when every file is
//     complete, so an error never leaves partial output. Files already in DESTDIR that this
//     run does not produce are left alone, except splits (train/valid*/test* .bin/.idx) binarized
//     with another dictionary than the one this run writes: they are removed, each with a
//     warning, since train and eval-lm would read them with the new dict.txt.
//   * The result does not depend on `workers`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/binarizer.h"
#include "data/dictionary.h"
#include "data/text_scan.h"

namespace stretch::data {

struct PreprocessConfig {
  std::string trainpref;            // --trainpref FILE
  std::string validpref;            // --validpref FILE[,FILE...]
  std::string testpref;             // --testpref FILE[,FILE...]
  std::string destdir = "data-bin"; // --destdir
  std::string srcdict;              // --srcdict: use this dict.txt instead of building one
  bool dict_only = false;           // --dict-only: write dict.txt (and preprocess.json), binarize nothing
  int workers = 1;                  // --workers
  FinalizeParams finalize;          // --thresholdsrc, --nwordssrc, --padding-factor
  TokenMode mode = TokenMode::Text; // --byte-level selects TokenMode::Byte
};

struct SplitReport {
  std::string name;    // "train", "valid", "valid1", "test", …
  std::string source;  // input path
  BinarizeStats stats;
  int64_t bytes = 0;   // input size
  double seconds = 0;  // binarization wall time
};

struct PreprocessReport {
  int64_t dict_size = 0;
  std::string dict_hash;
  std::vector<SplitReport> splits;
};

// Run it; logs one line per split ("N lines, M tokens, x% replaced by <unk>"). Throws
// stretch::Error on bad input, leaving DESTDIR as it was.
PreprocessReport preprocess(const PreprocessConfig& cfg);

}  // namespace stretch::data
