// data/dictionary.h — fairseq's Dictionary: symbols, ids and dict.txt (REFERENCE.md §4.1).
// Contract:
//   * The 4 specials come first: <s>=0 (bos), <pad>=1, </s>=2 (eos), <unk>=3.
//   * load(dict.txt): line k (0-based) gets id 4+k. Each line is "<symbol> <count>", split
//     at the LAST space after stripping trailing whitespace, with an optional trailing
//     " #fairseq:overwrite" flag. A duplicate without the flag, a line without a count, or a
//     count that is not an integer is an Error naming file:line. With the flag the symbol
//     gets a new id and index() returns the newest one (fairseq's add_symbol(overwrite)).
//   * save(dict.txt): one "<symbol> <count>" line per non-special symbol in id order.
//   * build: count every token of every line plus one </s> per line (counts of symbols that
//     already exist, e.g. a literal <unk> or </s>, go to that entry), then finalize: specials
//     stay, the rest sorted by count descending with ties broken by ascending byte order of
//     the symbol (= code-point order for UTF-8, what fairseq's sorted Counter gives), keep
//     count >= threshold, at most nwords symbols in total (specials included; <= 0 = all),
//     then pad the size to a multiple of padding_factor with madeupword0000, 0001, ...
//   * Symbols are byte strings: invalid UTF-8 is allowed and kept as it is.
//   * index(word) is a hash lookup without allocation (symbol_table.h); unknown words give unk().
//   * content_hash(): "fnv1a64:<16 hex digits>" over the symbols in id order (counts
//     excluded), so a checkpoint can tell whether it was trained with this dictionary.
//   * Byte-level dictionaries (TokenMode::Byte, enwik8) have symbols "0".."255", the decimal
//     value of each byte; byte_ids() maps bytes to ids and is_byte_level() recognises them.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/symbol_table.h"

namespace stretch::data {

struct FinalizeParams {
  int64_t threshold = 0;      // --thresholdsrc: keep symbols with count >= threshold
  int64_t nwords = -1;        // --nwordssrc: at most this many symbols incl. specials; <= 0: all
  int64_t padding_factor = 8; // --padding-factor: size rounded up to a multiple (<= 1: none)
};

class Dictionary {
 public:
  static constexpr int32_t kBos = 0, kPad = 1, kEos = 2, kUnk = 3, kNumSpecial = 4;
  static constexpr const char* kOverwriteFlag = "#fairseq:overwrite";

  Dictionary();  // the 4 specials only

  // dict.txt I/O. load() errors name path:line; save() writes to path (callers that need
  // atomicity write into a temporary directory first).
  static Dictionary load(const std::string& path);
  static Dictionary parse(std::string_view text, const std::string& path_for_errors);
  void save(const std::string& path) const;
  std::string to_text() const;  // the dict.txt contents

  // fairseq's add_symbol: Accumulate adds `count` to an existing symbol or appends a new one;
  // Overwrite always appends, and index(word) then returns the new id.
  enum class AddMode : uint8_t { Accumulate, Overwrite };
  int32_t add_symbol(std::string_view word, int64_t count = 1, AddMode mode = AddMode::Accumulate);
  void finalize(const FinalizeParams& p);

  int32_t index(std::string_view word) const {
    const int32_t id = table_.find(word, symbols_);
    return id == SymbolTable::kNotFound ? kUnk : id;
  }
  bool contains(std::string_view word) const { return table_.find(word, symbols_) != SymbolTable::kNotFound; }
  const std::string& symbol(int32_t id) const;  // Error if out of range
  int64_t count(int32_t id) const { return counts_.at(static_cast<size_t>(id)); }
  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  int32_t bos() const { return kBos; }
  int32_t pad() const { return kPad; }
  int32_t eos() const { return kEos; }
  int32_t unk() const { return kUnk; }

  // Text <-> ids. encode_line appends eos (fairseq's encode_line, add_if_not_exist=False);
  // decode joins symbols with spaces and stops nothing: eos is written as "</s>" unless
  // skip_eos, and pads are always skipped.
  std::vector<int32_t> encode_line(std::string_view line) const;
  enum class EosInDecode : uint8_t { Keep, Skip };
  std::string decode(const std::vector<int32_t>& ids, EosInDecode eos = EosInDecode::Skip) const;

  // Byte-level: id of each byte value (unk where the dictionary lacks it).
  std::array<int32_t, 256> byte_ids() const;
  // True if every non-special symbol is a decimal byte value "0".."255" or a madeupword.
  bool is_byte_level() const;
  // Byte-level decode: ids -> raw bytes, eos -> '\n', pads skipped; Error on other symbols.
  std::string decode_bytes(const std::vector<int32_t>& ids) const;

  std::string content_hash() const;

 private:
  std::vector<std::string> symbols_;
  std::vector<int64_t> counts_;
  SymbolTable table_;  // word -> newest id
};

}  // namespace stretch::data
