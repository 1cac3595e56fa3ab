// train/tensorboard_writer.cpp — see tensorboard_writer.h.
#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace stretch::train {
namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protocol-buffer wire format (varint = 0, fixed64 = 1, length-delimited = 2, fixed32 = 5).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }
template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian on x86-64, as the wire format wants
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
// Event's first two fields: double wall_time = 1; int64 step = 2 (omitted when 0, as proto3 does).
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, 1);
  put_fixed<double>(e, wall_time);
  if (step != 0) {
    put_key(e, 2, 0);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

double wall_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = kCrc32cTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  const uint64_t n = data.size();
  put_fixed<uint64_t>(r, n);
  put_fixed<uint32_t>(r, masked_crc32c(r.data(), 8));
  r += data;
  put_fixed<uint32_t>(r, masked_crc32c(data.data(), data.size()));
  return r;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;  // Summary.Value { string tag = 1; float simple_value = 2; }
  put_bytes(v, 1, tag);
  put_key(v, 2, 5);
  put_fixed<float>(v, value);
  std::string summary;  // Summary { repeated Value value = 1; }
  put_bytes(summary, 1, v);
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);  // Event.summary = 5
  return e;
}

std::string file_version_event(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");  // Event.file_version = 3
  return e;
}

TensorboardWriter::TensorboardWriter(std::string logdir) : logdir_(std::move(logdir)) {
  std::error_code ec;
  std::filesystem::create_directories(logdir_, ec);
  if (ec || !std::filesystem::is_directory(logdir_))
    fail_io(logdir_, "--tensorboard-logdir: cannot create the directory (" + ec.message() + ")",
            "give a writable directory");
}

TensorboardWriter::~TensorboardWriter() {
  for (auto& [run, f] : files_)
    if (f.f) std::fclose(f.f);
}

TensorboardWriter::File& TensorboardWriter::file(const std::string& run) {
  auto it = files_.find(run);
  if (it != files_.end()) return it->second;
  const std::filesystem::path dir = std::filesystem::path(logdir_) / run;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double now = wall_seconds();
  char name[400];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%lld.0", static_cast<long long>(now), host,
                static_cast<long long>(getpid()));
  File f;
  f.path = (dir / name).string();
  f.f = std::fopen(f.path.c_str(), "ab");
  if (!f.f)
    fail_io(f.path, std::string("--tensorboard-logdir: cannot open the event file: ") + std::strerror(errno),
            "give a writable directory");
  File& out = files_.emplace(run, f).first->second;
  append(out, tfrecord(file_version_event(now)));
  return out;
}

void TensorboardWriter::append(File& f, const std::string& record) {
  if (std::fwrite(record.data(), 1, record.size(), f.f) != record.size() || std::fflush(f.f) != 0)
    fail_io(f.path, std::string("--tensorboard-logdir: cannot write the event file: ") + std::strerror(errno),
            "free disk space or give another directory");
}

void TensorboardWriter::write(const std::string& run, int64_t step, const std::vector<TensorboardScalar>& scalars) {
  File& f = file(run);
  const double now = wall_seconds();
  std::string records;
  for (const TensorboardScalar& s : scalars) records += tfrecord(scalar_event(now, step, s.tag, s.value));
  append(f, records);
}

}  // namespace stretch::train
