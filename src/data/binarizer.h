// data/binarizer.h — text (or raw bytes) to token counts and to binarized ids, in parallel.
// Contract (REFERENCE.md §4.2):
//   * Each input line becomes one item: the ids of its tokens (unknown words -> <unk>=3)
//     followed by </s>=2; an empty or whitespace-only line is the item [2]. Tokenisation and
//     line ends are text_scan.h's (fairseq's), per TokenMode.
//   * Work is split into byte ranges whose boundaries are line starts; `workers` threads
//     process ranges and the results are written in file order, so the output is byte for
//     byte the same for any number of workers (tests/data/test_binarize.cpp checks it).
//   * No allocation per token: tokens are string_views into the mapped file and ids go
//     straight into a per-range buffer of the output dtype.
//   * "replaced" counts words that were not in the dictionary (a literal "<unk>" in the text
//     is not counted), as fairseq's "% replaced by <unk>".
//   * Progress: `on_bytes`, when set, is called on the calling thread with the bytes of the file
//     done so far (ranges finished in count_tokens, written in binarize_file), in increasing order.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dictionary.h"
#include "data/indexed_dataset.h"
#include "data/mapped_file.h"
#include "data/text_scan.h"

namespace stretch::data {

struct ScanParams {
  TokenMode mode = TokenMode::Text;
  int workers = 1;          // threads; results do not depend on it
  size_t range_bytes = 0;   // bytes per work range (rounded to line starts); 0 = automatic
  std::function<void(int64_t)> on_bytes = {};  // progress: bytes of the file done so far (may be empty)
};

struct BinarizeStats {
  int64_t lines = 0;      // items written
  int64_t tokens = 0;     // ids written, </s> included
  int64_t replaced = 0;   // out-of-vocabulary words mapped to <unk>
  Utf8Report utf8;        // Text mode: bytes that are not valid UTF-8
  double replaced_percent() const { return tokens ? 100.0 * static_cast<double>(replaced) / static_cast<double>(tokens) : 0.0; }
};

struct TokenCounts {
  std::vector<std::pair<std::string, int64_t>> words;  // every distinct token, sorted by bytes
  int64_t lines = 0;                                    // = the count of </s>
  Utf8Report utf8;
};

// Count the tokens of one file (for building a dictionary).
TokenCounts count_tokens(const MappedFile& file, const ScanParams& p);

// fairseq's build_dictionary over the training files: count, add in sorted order, finalize.
Dictionary build_dictionary(const std::vector<const MappedFile*>& files, const ScanParams& p,
                            const FinalizeParams& f);

// Binarize one file with a fixed dictionary, appending its items to `out`.
BinarizeStats binarize_file(const MappedFile& file, const Dictionary& dict, const ScanParams& p,
                            IndexedDatasetWriter& out);

// Binarize in memory (tests, small inputs): the items as ids.
std::vector<std::vector<int32_t>> binarize_text(std::string_view text, const Dictionary& dict, TokenMode mode,
                                                BinarizeStats* stats = nullptr);

}  // namespace stretch::data
