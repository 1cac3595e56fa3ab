// data/mapped_file.cpp — see mapped_file.h.
#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace stretch::data {

MappedFile MappedFile::open(const std::string& path, const std::string& what) {
  const std::string from = what.empty() ? "" : " (from " + what + ")";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) fail_input(path, "no such file" + from, "check the path and the file name");
    fail_input(path, std::string("cannot open: ") + std::strerror(e) + from, "check the file's permissions");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail_io(path, std::string("cannot stat: ") + std::strerror(e) + from);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail_input(path, "not a regular file" + from, "pass the path of a file, not a directory");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail_io(path, std::string("cannot map into memory: ") + std::strerror(e) + from);
    }
    f.data_ = static_cast<const char*>(p);
  }
  ::close(fd);
  return f;
}

void MappedFile::advise_sequential() const {
  if (data_) ::madvise(const_cast<char*>(data_), size_, MADV_SEQUENTIAL);
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace stretch::data
