// data/indexed_dataset.h — fairseq's memory-mapped indexed dataset (MMIDIDX v1), read and
// written byte for byte as fairseq does (REFERENCE.md §4.2, docs/formats.md ".bin/.idx").
// Layout, all little-endian:
//   PREFIX.idx: magic "MMIDIDX\0\0" (9 bytes) | u64 version = 1 | u8 dtype code |
//               u64 N | int32 sizes[N] | int64 byte_pointers[N]
//   PREFIX.bin: the N items' token ids back to back, each of the dtype's width.
//   dtype codes: 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f64, 8 u16, 9 u32, 10 u64.
// Contract:
//   * IndexedDataset::open(prefix) maps both files and checks everything that can be checked
//     without reading the tokens: magic, version, dtype code, the .idx length (26 + 12N), every
//     size >= 0, pointers consecutive from 0, and the .bin length. Each failure is one Error
//     naming the file and the byte offset. validate_ids(V) then reads every token and fails
//     on the first id outside [0, V) with its file, byte offset, item and position.
//   * Any dtype code is read; ids come out as int32 (an id above INT32_MAX, or a float code
//     holding a non-integer, is reported by validate_ids).
//   * IndexedDatasetWriter writes PREFIX.bin as items arrive and PREFIX.idx at finish();
//     dtype_for_vocab(V) is fairseq's choice: uint16 if V < 65500, uint32 if V < 2^32-1,
//     else int64.
//   * TokenStream is what blocks, batches and windows read: items (lines) of ids back to
//     back, with offsets in tokens. IndexedDataset and MemoryTokenStream implement it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/mapped_file.h"

namespace stretch::data {

enum class DTypeCode : uint8_t { U8 = 1, I8 = 2, I16 = 3, I32 = 4, I64 = 5, F64 = 6, Double = 7, U16 = 8, U32 = 9, U64 = 10 };
int dtype_code_size(DTypeCode c);
const char* dtype_code_name(DTypeCode c);
DTypeCode dtype_for_vocab(int64_t vocab_size);

// The concatenation of items S = item_0 ‖ item_1 ‖ … (N items, total_tokens() ids).
class TokenStream {
 public:
  virtual ~TokenStream() = default;
  int64_t num_items() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t total_tokens() const { return offsets_.back(); }
  int64_t item_size(int64_t i) const { return offsets_[static_cast<size_t>(i) + 1] - offsets_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& item_offsets() const { return offsets_; }  // [N + 1], token offsets
  // Copy S[offset, offset + count) into out[count]. Bounds are checked.
  virtual void read_tokens(int64_t offset, int64_t count, int32_t* out) const = 0;
  std::vector<int32_t> item(int64_t i) const;                     // [item_size(i)]
  std::vector<int32_t> tokens(int64_t offset, int64_t count) const;  // [count]

 protected:
  std::vector<int64_t> offsets_{0};
};

// In-memory stream, for tests and small inputs.
class MemoryTokenStream final : public TokenStream {
 public:
  explicit MemoryTokenStream(const std::vector<std::vector<int32_t>>& items);
  MemoryTokenStream(std::vector<int32_t> flat, const std::vector<int64_t>& sizes);
  void read_tokens(int64_t offset, int64_t count, int32_t* out) const override;

 private:
  std::vector<int32_t> flat_;
};

class IndexedDataset final : public TokenStream {
 public:
  // prefix: path without extension, e.g. "data-bin/ptb/train".
  static std::shared_ptr<IndexedDataset> open(const std::string& prefix);
  static bool exists(const std::string& prefix);  // both PREFIX.idx and PREFIX.bin are files

  void read_tokens(int64_t offset, int64_t count, int32_t* out) const override;
  // Read every id; Error on the first outside [0, vocab_size) (or not an integer).
  void validate_ids(int64_t vocab_size, const std::string& dict_path = "the dictionary") const;

  DTypeCode dtype() const { return dtype_; }
  const std::vector<int32_t>& sizes() const { return sizes_; }  // [N]
  const std::string& prefix() const { return prefix_; }

 private:
  IndexedDataset() = default;
  std::string prefix_;
  MappedFile bin_;
  DTypeCode dtype_ = DTypeCode::U16;
  std::vector<int32_t> sizes_;
};

class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, DTypeCode dtype);
  ~IndexedDatasetWriter();  // closes without writing .idx if finish() was not called
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Append items whose ids are already in the output dtype: data[total] bytes, sizes[n].
  void add_raw(const void* data, size_t bytes, const int32_t* sizes, size_t n);
  // Append one item given as int32 ids[n] (converted to the dtype).
  void add_item(const int32_t* ids, int32_t n);
  void finish();
  DTypeCode dtype() const { return dtype_; }
  int64_t num_items() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t total_tokens() const { return total_tokens_; }

 private:
  void write_bin(const void* data, size_t bytes);
  std::string prefix_;
  DTypeCode dtype_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> sizes_;
  int64_t total_tokens_ = 0;
  std::vector<char> scratch_;
};

}  // namespace stretch::data
