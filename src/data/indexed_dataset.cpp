// data/indexed_dataset.cpp — see indexed_dataset.h.
#include "data/indexed_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/error.h"

namespace stretch::data {

namespace {
constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8;  // magic, version, dtype code, N

template <class T>
T load_le(const uint8_t* p) {  // the host is little-endian (x86-64, aarch64), as fairseq's files
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void convert(const uint8_t* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const T v = load_le<T>(src + i * static_cast<int64_t>(sizeof(T)));
    if constexpr (std::is_floating_point_v<T>) {
      // A float outside int32 (or NaN) has no int32 value (the cast would be undefined; found by
      // tests/fuzz/fuzz_mmidx): -1, an id validate_ids() reports with its byte offset.
      out[i] = v >= -2147483648.0 && v < 2147483648.0 ? static_cast<int32_t>(v) : -1;
    } else {
      out[i] = static_cast<int32_t>(v);
    }
  }
}

// Calls f(index, value as double-or-int64) until f returns false; returns the failing index or -1.
template <class T>
int64_t first_bad(const uint8_t* src, int64_t count, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i) {
    T v = load_le<T>(src + i * static_cast<int64_t>(sizeof(T)));
    if constexpr (std::is_floating_point_v<T>) {
      if (!(v >= 0 && v < static_cast<T>(vocab) && std::floor(v) == v)) return i;
    } else if constexpr (std::is_signed_v<T>) {
      if (v < 0 || static_cast<int64_t>(v) >= vocab) return i;
    } else {
      if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(vocab)) return i;
    }
  }
  return -1;
}

std::string value_at(const uint8_t* p, DTypeCode c) {
  switch (c) {
    case DTypeCode::U8: return std::to_string(*p);
    case DTypeCode::I8: return std::to_string(static_cast<int8_t>(*p));
    case DTypeCode::I16: return std::to_string(load_le<int16_t>(p));
    case DTypeCode::I32: return std::to_string(load_le<int32_t>(p));
    case DTypeCode::I64: return std::to_string(load_le<int64_t>(p));
    case DTypeCode::F64:
    case DTypeCode::Double: return std::to_string(load_le<double>(p));
    case DTypeCode::U16: return std::to_string(load_le<uint16_t>(p));
    case DTypeCode::U32: return std::to_string(load_le<uint32_t>(p));
    case DTypeCode::U64: return std::to_string(load_le<uint64_t>(p));
  }
  return "?";
}
}  // namespace

int dtype_code_size(DTypeCode c) {
  switch (c) {
    case DTypeCode::U8: case DTypeCode::I8: return 1;
    case DTypeCode::I16: case DTypeCode::U16: return 2;
    case DTypeCode::I32: case DTypeCode::U32: return 4;
    case DTypeCode::I64: case DTypeCode::F64: case DTypeCode::Double: case DTypeCode::U64: return 8;
  }
  return 0;
}

const char* dtype_code_name(DTypeCode c) {
  switch (c) {
    case DTypeCode::U8: return "uint8";
    case DTypeCode::I8: return "int8";
    case DTypeCode::I16: return "int16";
    case DTypeCode::I32: return "int32";
    case DTypeCode::I64: return "int64";
    case DTypeCode::F64: return "float64";
    case DTypeCode::Double: return "double";
    case DTypeCode::U16: return "uint16";
    case DTypeCode::U32: return "uint32";
    case DTypeCode::U64: return "uint64";
  }
  return "?";
}

DTypeCode dtype_for_vocab(int64_t vocab_size) {
  if (vocab_size < 65500) return DTypeCode::U16;
  if (vocab_size < 4294967295LL) return DTypeCode::U32;
  return DTypeCode::I64;
}

// ---- TokenStream -------------------------------------------------------------------------

std::vector<int32_t> TokenStream::item(int64_t i) const {
  STRETCH_CHECK(i >= 0 && i < num_items(), "item " << i << " of " << num_items());
  return tokens(offsets_[static_cast<size_t>(i)], item_size(i));
}

std::vector<int32_t> TokenStream::tokens(int64_t offset, int64_t count) const {
  std::vector<int32_t> out(static_cast<size_t>(count));
  read_tokens(offset, count, out.data());
  return out;
}

MemoryTokenStream::MemoryTokenStream(const std::vector<std::vector<int32_t>>& items) {
  for (const auto& it : items) {
    flat_.insert(flat_.end(), it.begin(), it.end());
    offsets_.push_back(static_cast<int64_t>(flat_.size()));
  }
}

MemoryTokenStream::MemoryTokenStream(std::vector<int32_t> flat, const std::vector<int64_t>& sizes)
    : flat_(std::move(flat)) {
  for (int64_t s : sizes) offsets_.push_back(offsets_.back() + s);
  STRETCH_CHECK(offsets_.back() == static_cast<int64_t>(flat_.size()),
                "sizes sum to " << offsets_.back() << " but there are " << flat_.size() << " tokens");
}

void MemoryTokenStream::read_tokens(int64_t offset, int64_t count, int32_t* out) const {
  STRETCH_CHECK(offset >= 0 && count >= 0 && offset + count <= total_tokens(),
                "read [" << offset << ", " << offset + count << ") of " << total_tokens() << " tokens");
  if (count) std::memcpy(out, flat_.data() + offset, static_cast<size_t>(count) * sizeof(int32_t));
}

// ---- IndexedDataset ----------------------------------------------------------------------

bool IndexedDataset::exists(const std::string& prefix) {
  return is_regular_file(prefix + ".idx") && is_regular_file(prefix + ".bin");
}

std::shared_ptr<IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  const std::string remake = "re-create it with stretch preprocess (or fairseq-preprocess)";
  MappedFile idx = MappedFile::open(idx_path, "index of " + prefix);
  const uint8_t* p = idx.bytes();
  const size_t n_bytes = idx.size();
  auto need = [&](size_t bytes, const char* what) {
    if (n_bytes < bytes)
      fail_input(idx_path, "truncated at byte offset " + std::to_string(n_bytes) + " (the file ends inside the " +
                               what + ", which needs " + std::to_string(bytes) + " bytes)", remake);
  };
  need(9, "9-byte magic");
  if (std::memcmp(p, kMagic, 9) != 0)
    fail_input(idx_path, "wrong magic at byte offset 0: not a fairseq MMIDIDX index (expected \"MMIDIDX\\0\\0\")",
               "only fairseq's default --dataset-impl mmap format is supported; " + remake);
  need(17, "version");
  const uint64_t version = load_le<uint64_t>(p + 9);
  if (version != 1)
    fail_input(idx_path, "unsupported version " + std::to_string(version) + " at byte offset 9 (expected 1)", remake);
  need(18, "dtype code");
  const uint8_t code = p[17];
  if (code < 1 || code > 10)
    fail_input(idx_path, "unknown dtype code " + std::to_string(code) + " at byte offset 17 (expected 1..10)", remake);
  need(kHeaderBytes, "item count");
  const uint64_t n = load_le<uint64_t>(p + 18);
  const uint64_t max_n = (n_bytes - kHeaderBytes) / 12;
  if (n > max_n)
    fail_input(idx_path, "truncated: the header at byte offset 18 says " + std::to_string(n) + " items, which need " +
                             (n > (1ull << 58) ? std::string("more") : std::to_string(kHeaderBytes + 12 * n)) +
                             " bytes, but the file has " + std::to_string(n_bytes), remake);
  const size_t expected = kHeaderBytes + 12 * n;
  if (n_bytes != expected)
    fail_input(idx_path, "has " + std::to_string(n_bytes - expected) + " unexpected bytes after byte offset " +
                             std::to_string(expected) + " (the end of the pointer table for " + std::to_string(n) +
                             " items)", remake);

  auto ds = std::shared_ptr<IndexedDataset>(new IndexedDataset());
  ds->prefix_ = prefix;
  ds->dtype_ = static_cast<DTypeCode>(code);
  const int64_t width = dtype_code_size(ds->dtype_);
  ds->sizes_.resize(n);
  ds->offsets_.assign(1, 0);
  ds->offsets_.reserve(n + 1);
  const uint8_t* sizes_at = p + kHeaderBytes;
  const uint8_t* ptrs_at = sizes_at + 4 * n;
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t s = load_le<int32_t>(sizes_at + 4 * i);
    if (s < 0)
      fail_input(idx_path, "negative size " + std::to_string(s) + " of item " + std::to_string(i) + " at byte offset " +
                               std::to_string(kHeaderBytes + 4 * i), remake);
    const int64_t ptr = load_le<int64_t>(ptrs_at + 8 * i);
    const int64_t want = ds->offsets_.back() * width;
    if (ptr != want)
      fail_input(idx_path, "pointer of item " + std::to_string(i) + " at byte offset " +
                               std::to_string(kHeaderBytes + 4 * n + 8 * i) + " is " + std::to_string(ptr) +
                               ", expected " + std::to_string(want) + " (items must be stored back to back)", remake);
    ds->sizes_[i] = s;
    ds->offsets_.push_back(ds->offsets_.back() + s);
  }
  ds->bin_ = MappedFile::open(bin_path, "data of " + prefix);
  const int64_t bin_bytes = static_cast<int64_t>(ds->bin_.size());
  const int64_t want_bytes = ds->offsets_.back() * width;
  if (bin_bytes < want_bytes) {
    // Name the first item that is cut.
    int64_t lo = 0, hi = static_cast<int64_t>(n) - 1;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (ds->offsets_[static_cast<size_t>(mid) + 1] * width > bin_bytes) hi = mid;
      else lo = mid + 1;
    }
    fail_input(bin_path, "truncated: the file ends at byte offset " + std::to_string(bin_bytes) + " but " + idx_path +
                             " describes " + std::to_string(want_bytes) + " bytes (" + std::to_string(ds->offsets_.back()) +
                             " " + dtype_code_name(ds->dtype_) + " ids); item " + std::to_string(lo) + " is cut", remake);
  }
  if (bin_bytes > want_bytes)
    fail_input(bin_path, "has " + std::to_string(bin_bytes - want_bytes) + " bytes after byte offset " +
                             std::to_string(want_bytes) + ", where " + idx_path + " says the data ends",
               "the .bin and .idx do not belong together; " + remake);
  return ds;
}

void IndexedDataset::read_tokens(int64_t offset, int64_t count, int32_t* out) const {
  STRETCH_CHECK(offset >= 0 && count >= 0 && offset + count <= total_tokens(),
                "read [" << offset << ", " << offset + count << ") of " << total_tokens() << " tokens in " << prefix_);
  const int64_t w = dtype_code_size(dtype_);
  const uint8_t* src = bin_.bytes() + offset * w;
  switch (dtype_) {
    case DTypeCode::U8: convert<uint8_t>(src, count, out); break;
    case DTypeCode::I8: convert<int8_t>(src, count, out); break;
    case DTypeCode::I16: convert<int16_t>(src, count, out); break;
    case DTypeCode::I32: convert<int32_t>(src, count, out); break;
    case DTypeCode::I64: convert<int64_t>(src, count, out); break;
    case DTypeCode::F64: case DTypeCode::Double: convert<double>(src, count, out); break;
    case DTypeCode::U16: convert<uint16_t>(src, count, out); break;
    case DTypeCode::U32: convert<uint32_t>(src, count, out); break;
    case DTypeCode::U64: convert<uint64_t>(src, count, out); break;
  }
}

void IndexedDataset::validate_ids(int64_t vocab_size, const std::string& dict_path) const {
  const int64_t n = total_tokens();
  if (n == 0) return;
  const uint8_t* src = bin_.bytes();
  int64_t bad = -1;
  switch (dtype_) {
    case DTypeCode::U8: bad = first_bad<uint8_t>(src, n, vocab_size); break;
    case DTypeCode::I8: bad = first_bad<int8_t>(src, n, vocab_size); break;
    case DTypeCode::I16: bad = first_bad<int16_t>(src, n, vocab_size); break;
    case DTypeCode::I32: bad = first_bad<int32_t>(src, n, vocab_size); break;
    case DTypeCode::I64: bad = first_bad<int64_t>(src, n, vocab_size); break;
    case DTypeCode::F64: case DTypeCode::Double: bad = first_bad<double>(src, n, vocab_size); break;
    case DTypeCode::U16: bad = first_bad<uint16_t>(src, n, vocab_size); break;
    case DTypeCode::U32: bad = first_bad<uint32_t>(src, n, vocab_size); break;
    case DTypeCode::U64: bad = first_bad<uint64_t>(src, n, vocab_size); break;
  }
  if (bad < 0) return;
  const int64_t w = dtype_code_size(dtype_);
  // Item holding token `bad`: the last offset <= bad.
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), bad);
  const int64_t item = static_cast<int64_t>(it - offsets_.begin()) - 1;
  fail_input(prefix_ + ".bin", "token id " + value_at(src + bad * w, dtype_) + " at byte offset " +
                                   std::to_string(bad * w) + " (item " + std::to_string(item) + ", position " +
                                   std::to_string(bad - offsets_[static_cast<size_t>(item)]) +
                                   ") is not an id of " + dict_path + " (size " + std::to_string(vocab_size) + ")",
             "the data was binarized with a different dictionary; use the dict.txt from the same directory, or "
             "re-run stretch preprocess");
}

// ---- IndexedDatasetWriter ----------------------------------------------------------------

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, DTypeCode dtype) : prefix_(prefix), dtype_(dtype) {
  const std::string path = prefix + ".bin";
  bin_ = std::fopen(path.c_str(), "wb");
  if (!bin_)
    fail_io(path, std::string("cannot create: ") + std::strerror(errno), "check that the directory exists and is writable");
  std::setvbuf(bin_, nullptr, _IOFBF, 1 << 20);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_) std::fclose(bin_);
}

void IndexedDatasetWriter::write_bin(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, bin_) != bytes)
    fail_io(prefix_ + ".bin", std::string("write failed: ") + std::strerror(errno), "is the disk full?");
}

void IndexedDatasetWriter::add_raw(const void* data, size_t bytes, const int32_t* sizes, size_t n) {
  STRETCH_CHECK(bin_, "writer for " << prefix_ << " already finished");
  int64_t tokens = 0;
  for (size_t i = 0; i < n; ++i) tokens += sizes[i];
  STRETCH_CHECK(static_cast<size_t>(tokens * dtype_code_size(dtype_)) == bytes,
                bytes << " bytes for " << tokens << " tokens of " << dtype_code_name(dtype_));
  write_bin(data, bytes);
  sizes_.insert(sizes_.end(), sizes, sizes + n);
  total_tokens_ += tokens;
}

void IndexedDatasetWriter::add_item(const int32_t* ids, int32_t n) {
  const int w = dtype_code_size(dtype_);
  scratch_.resize(static_cast<size_t>(n) * static_cast<size_t>(w));
  for (int32_t i = 0; i < n; ++i) {
    char* dst = scratch_.data() + static_cast<size_t>(i) * static_cast<size_t>(w);
    const int32_t v = ids[i];
    switch (dtype_) {
      case DTypeCode::U8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(dst, &x, 1); break; }
      case DTypeCode::I8: { int8_t x = static_cast<int8_t>(v); std::memcpy(dst, &x, 1); break; }
      case DTypeCode::I16: { int16_t x = static_cast<int16_t>(v); std::memcpy(dst, &x, 2); break; }
      case DTypeCode::U16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(dst, &x, 2); break; }
      case DTypeCode::I32: { std::memcpy(dst, &v, 4); break; }
      case DTypeCode::U32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(dst, &x, 4); break; }
      case DTypeCode::I64: { int64_t x = v; std::memcpy(dst, &x, 8); break; }
      case DTypeCode::U64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(dst, &x, 8); break; }
      case DTypeCode::F64: case DTypeCode::Double: { double x = v; std::memcpy(dst, &x, 8); break; }
    }
  }
  add_raw(scratch_.data(), scratch_.size(), &n, 1);
}

void IndexedDatasetWriter::finish() {
  STRETCH_CHECK(bin_, "writer for " << prefix_ << " already finished");
  const std::string bin_path = prefix_ + ".bin";
  std::FILE* f = bin_;
  bin_ = nullptr;
  if (std::fclose(f) != 0) fail_io(bin_path, std::string("write failed: ") + std::strerror(errno), "is the disk full?");

  const std::string idx_path = prefix_ + ".idx";
  std::FILE* idx = std::fopen(idx_path.c_str(), "wb");
  if (!idx) fail_io(idx_path, std::string("cannot create: ") + std::strerror(errno), "check that the directory is writable");
  std::vector<char> buf;
  const uint64_t n = sizes_.size();
  buf.resize(kHeaderBytes + 12 * n);
  char* p = buf.data();
  std::memcpy(p, kMagic, 9);
  const uint64_t version = 1;
  std::memcpy(p + 9, &version, 8);
  p[17] = static_cast<char>(dtype_);
  std::memcpy(p + 18, &n, 8);
  if (n) std::memcpy(p + kHeaderBytes, sizes_.data(), 4 * n);
  int64_t ptr = 0;
  const int64_t w = dtype_code_size(dtype_);
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(p + kHeaderBytes + 4 * n + 8 * i, &ptr, 8);
    ptr += static_cast<int64_t>(sizes_[i]) * w;
  }
  const bool ok = std::fwrite(buf.data(), 1, buf.size(), idx) == buf.size();
  if (std::fclose(idx) != 0 || !ok) fail_io(idx_path, std::string("write failed: ") + std::strerror(errno), "is the disk full?");
}

}  // namespace stretch::data
