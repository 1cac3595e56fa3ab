// tensor/safetensors.cpp — the safetensors reader and atomic writer (contract in the header).
#include "tensor/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/orphans.h"

namespace stretch {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping here");

namespace {

// The reference implementation refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

safetensors_testing::WriteFault g_fault;

struct DtypeName {
  DType dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {DType::F32, "F32"}, {DType::I32, "I32"}, {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::U8, "U8"},
};

std::string sys_error(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------------------
// Writer

class TempFile {
 public:
  TempFile(std::string final_path) : path_(std::move(final_path)) {
    tmp_ = pid_temporary(path_);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && created_) ::unlink(tmp_.c_str());
  }

  void open() {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(errno, "could not create the temporary file " + tmp_);
    created_ = true;
  }

  void write_all(const void* data, uint64_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
      ssize_t w;
      if (g_fault.stage == safetensors_testing::FaultStage::Write) {
        // Write what the fault allows, then fail like a full disk.
        const uint64_t limit = static_cast<uint64_t>(std::max<int64_t>(g_fault.after_bytes, 0));
        const uint64_t allowed = limit > written_ ? limit - written_ : 0;
        if (allowed == 0) {
          errno = g_fault.error;
          w = -1;
        } else {
          w = ::write(fd_, p, static_cast<size_t>(std::min<uint64_t>(allowed, chunk)));
        }
      } else {
        w = ::write(fd_, p, chunk);
      }
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(errno, "could not write byte " + std::to_string(written_) + " of " + std::to_string(total_) + " to " + tmp_);
      }
      if (w == 0) fail(EIO, "write returned 0 at byte " + std::to_string(written_) + " of " + tmp_);
      p += w;
      n -= static_cast<uint64_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
  }

  void commit() {
    int rc = g_fault.stage == safetensors_testing::FaultStage::Fsync ? (errno = g_fault.error, -1) : ::fsync(fd_);
    if (rc != 0) fail(errno, "could not flush " + tmp_ + " to disk (fsync)");
    rc = g_fault.stage == safetensors_testing::FaultStage::Close ? (::close(fd_), errno = g_fault.error, -1) : ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail(errno, "could not close " + tmp_);
    rc = g_fault.stage == safetensors_testing::FaultStage::Rename ? (errno = g_fault.error, -1)
                                                                  : ::rename(tmp_.c_str(), path_.c_str());
    if (rc != 0) fail(errno, "could not rename " + tmp_ + " to " + path_);
    committed_ = true;
    // Make the rename itself durable. Some filesystems cannot fsync a directory; the file
    // is complete either way, so this only warns.
    std::string dir = path_.substr(0, path_.find_last_of('/') == std::string::npos ? 0 : path_.find_last_of('/'));
    if (dir.empty()) dir = path_.find('/') == 0 ? "/" : ".";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      if (::fsync(dfd) != 0 && errno != EINVAL)
        log_once(LogLevel::Warning, "could not fsync directory " + dir + ": " + sys_error(errno));
      ::close(dfd);
    }
  }

  void set_total(uint64_t t) { total_ = t; }

 private:
  [[noreturn]] void fail(int err, const std::string& what) {
    const std::string reason = sys_error(err);
    std::string hint = err == ENOSPC || err == EDQUOT
                           ? "free disk space (or a quota) on that filesystem, or save somewhere else"
                           : "check that the directory exists and is writable, or save somewhere else";
    hint += "; any previous file at " + path_ + " is unchanged";
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
    if (created_) ::unlink(tmp_.c_str()), created_ = false;
    fail_io(path_, "could not save: " + what + ": " + reason, hint);
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool created_ = false, committed_ = false;
  uint64_t written_ = 0, total_ = 0;
};

// ---------------------------------------------------------------------------------------
// Reader helpers

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

uint64_t read_u64_le(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

void pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path, const std::string& what) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1u << 30)), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail_io(path, "could not read " + what + " at byte offset " + std::to_string(offset) + ": " + sys_error(errno));
    }
    if (r == 0)
      fail_input(path, "file ended at byte offset " + std::to_string(offset) + " while reading " + what,
                 "the file was truncated or changed while being read");
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

bool safetensors_dtype_from_name(const std::string& name, DType* out) {
  for (const auto& d : kDtypes)
    if (name == d.name) {
      *out = d.dtype;
      return true;
    }
  return false;
}

namespace safetensors_testing {
void set_write_fault(const WriteFault& fault) { g_fault = fault; }
}  // namespace safetensors_testing

void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  // Validate and order: element size descending, then name (the reference writer's order).
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& nt : tensors) {
    if (nt.first.empty()) fail_usage(path + ": cannot save a tensor with an empty name");
    if (nt.first == "__metadata__") fail_usage(path + ": a tensor cannot be named \"__metadata__\"");
    if (!nt.second.defined()) fail_usage(path + ": tensor '" + nt.first + "' is undefined");
    order.push_back(&nt);
  }
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    size_t sa = dtype_size(a->second.dtype()), sb = dtype_size(b->second.dtype());
    return sa != sb ? sa > sb : a->first < b->first;
  });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->first == order[i - 1]->first) fail_usage(path + ": tensor name '" + order[i]->first + "' given twice");

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto* nt : order) {
    const Tensor& t = nt->second;
    const uint64_t n = t.nbytes();
    header[nt->first] = {{"dtype", safetensors_dtype_name(t.dtype())},
                         {"shape", t.shape().dims()},
                         {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail_usage(path + ": a tensor name or metadata string is not valid UTF-8 (" + e.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  TempFile file(path);
  file.set_total(8 + n + offset);
  file.open();
  file.write_all(len, 8);
  file.write_all(text.data(), n);
  for (const auto* nt : order)
    if (nt->second.nbytes() > 0) file.write_all(nt->second.bytes(), nt->second.nbytes());
  file.commit();
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  fail_input(path, "has no tensor '" + name + "' (it holds " + std::to_string(tensors.size()) + " tensors)",
             "check that the file was written by the same model (architecture and options)");
}

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string not_st = "the file is truncated, corrupt, or not a safetensors file";
  Fd fd;
  fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd.fd < 0) fail_io(path, "cannot open: " + sys_error(errno), "check the path");
  struct stat st;
  if (::fstat(fd.fd, &st) != 0) fail_io(path, "cannot stat: " + sys_error(errno));
  if (!S_ISREG(st.st_mode)) fail_input(path, "is not a regular file", "give the path of a .safetensors file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8)
    fail_input(path, "file is " + std::to_string(size) + " bytes, too short for the 8-byte header length at byte offset 0", not_st);
  unsigned char len[8];
  pread_all(fd.fd, len, 8, 0, path, "the header length");
  const uint64_t n = read_u64_le(len);
  if (n > kMaxHeaderBytes || n > size - 8)
    fail_input(path, "header length " + std::to_string(n) + " (u64 at byte offset 0) " +
                         (n > kMaxHeaderBytes ? "exceeds the 100 MB limit" : "runs past the end of the " + std::to_string(size) + "-byte file"),
               not_st);
  std::string text(n, '\0');
  pread_all(fd.fd, text.data(), n, 8, path, "the JSON header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail_input(path, "JSON header is invalid near byte offset " + std::to_string(8 + (e.byte > 0 ? e.byte - 1 : 0)) + ": " + e.what(),
               not_st);
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number like 1e999 (fuzz finding)
    fail_input(path, std::string("JSON header (bytes 8..") + std::to_string(8 + n) + ") is invalid: " + e.what(), not_st);
  }
  if (!header.is_object()) fail_input(path, "JSON header at byte offset 8 is not an object", not_st);

  SafetensorsFile out;
  out.path = path;
  std::vector<Entry> entries;
  const uint64_t data_start = 8 + n, data_len = size - data_start;
  auto bad_entry = [&](const std::string& name, const std::string& what) {
    fail_input(path, "header (bytes 8.." + std::to_string(data_start) + "): tensor '" + name + "': " + what, not_st);
  };
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail_input(path, "header: \"__metadata__\" is not an object of strings", not_st);
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail_input(path, "header: \"__metadata__\" value of '" + k + "' is not a string", not_st);
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) bad_entry(name, "entry is not an object");
    Entry e{name, DType::F32, {}, 0, 0};
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad_entry(name, "no \"dtype\" string");
    const std::string dt = v["dtype"].get<std::string>();
    if (!safetensors_dtype_from_name(dt, &e.dtype)) {
      fail_input(path, "tensor '" + name + "' has dtype " + dt + ", which stretch does not read (it reads F32, I32, BF16, I64, U8)",
                 "convert the tensor before saving, e.g. tensor.float() in PyTorch");
    }
    if (!v.contains("shape") || !v["shape"].is_array()) bad_entry(name, "no \"shape\" array");
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad_entry(name, "shape " + v["shape"].dump() + " has an entry that is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || (dim != 0 && numel > (uint64_t{1} << 62) / dim))
        bad_entry(name, "shape " + v["shape"].dump() + " is too large");
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
        !v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned())
      bad_entry(name, "no \"data_offsets\" pair of non-negative integers");
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    if (e.end < e.begin) bad_entry(name, "data_offsets " + v["data_offsets"].dump() + " end before they begin");
    if (e.end > data_len)
      fail_input(path, "tensor '" + name + "' data [" + std::to_string(data_start + e.begin) + ", " +
                           std::to_string(data_start + e.end) + ") runs past the end of the file at byte offset " + std::to_string(size),
                 not_st);
    const uint64_t want = numel * dtype_size(e.dtype);
    if (e.end - e.begin != want)
      fail_input(path, "tensor '" + name + "' at byte offset " + std::to_string(data_start + e.begin) + ": shape " +
                           v["shape"].dump() + " of " + dt + " needs " + std::to_string(want) + " bytes but data_offsets span " +
                           std::to_string(e.end - e.begin),
                 not_st);
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      fail_input(path, "tensor '" + e.name + "' data starts at byte offset " + std::to_string(data_start + e.begin) +
                           ", inside tensor '" + prev->name + "' (which ends at " + std::to_string(data_start + cursor) + ")",
                 not_st);
    if (e.begin > cursor)
      fail_input(path, "bytes [" + std::to_string(data_start + cursor) + ", " + std::to_string(data_start + e.begin) +
                           ") belong to no tensor (before tensor '" + e.name + "')",
                 not_st);
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_len)
    fail_input(path, "tensor data ends at byte offset " + std::to_string(data_start + cursor) + " but the file has " +
                         std::to_string(size) + " bytes",
               not_st);

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(Shape(e.shape), e.dtype);
    if (t.nbytes() > 0) pread_all(fd.fd, t.bytes(), t.nbytes(), data_start + e.begin, path, "tensor '" + e.name + "'");
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace stretch
