// data/mapped_file.h — a whole file mapped read-only into memory (POSIX mmap).
// Contract: open() maps the file or throws stretch::Error naming the path and the reason
// (missing, a directory, unreadable). An empty file maps to size() == 0 and data() ==
// nullptr. The mapping lives as long as the object; string_views and pointers into it are
// valid until then. Move-only. Used by the binarizer (input text) and the indexed dataset
// reader (.bin/.idx), so corpora are never copied into the process heap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stretch::data {

class MappedFile {
 public:
  MappedFile() = default;
  // what: how the file is referred to in errors (e.g. "--trainpref"); may be empty.
  static MappedFile open(const std::string& path, const std::string& what = "");
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }  // [size()] bytes
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

  // Advise the kernel that the mapping is read front to back (binarization).
  void advise_sequential() const;

 private:
  void release();
  const char* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// True if path names an existing regular file.
bool is_regular_file(const std::string& path);

}  // namespace stretch::data
