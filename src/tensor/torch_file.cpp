// tensor/torch_file.cpp — see torch_file.h.
#include "tensor/torch_file.h"

#include <unistd.h>
#include <zip.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/orphans.h"

namespace stretch {
namespace {

const char* kHint = "stretch reads checkpoints written by torch.save (fairseq); re-download or re-save the file";

size_t element_size(const std::string& dtype, const std::string& path, const std::string& name) {
  if (dtype == "Float" || dtype == "Int") return 4;
  if (dtype == "Half" || dtype == "BFloat16" || dtype == "Short") return 2;
  if (dtype == "Double" || dtype == "Long") return 8;
  if (dtype == "Char" || dtype == "Byte" || dtype == "Bool") return 1;
  fail_input(path, "tensor '" + name + "' has the unknown storage type " + dtype, kHint);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io(path, "cannot open", "check the path and its permissions");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TorchFile load_zip(const std::string& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    const std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    fail_input(path, "is not a readable zip archive (" + why + ")", kHint);
  }
  struct Closer {
    zip_t* z;
    ~Closer() { zip_discard(z); }
  } closer{z};
  auto read_entry = [&](zip_int64_t index, const std::string& name) {
    zip_stat_t st;
    if (zip_stat_index(z, static_cast<zip_uint64_t>(index), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
      fail_input(path, "zip entry '" + name + "' has no size", kHint);
    zip_file_t* f = zip_fopen_index(z, static_cast<zip_uint64_t>(index), 0);
    if (!f) fail_input(path, "cannot open zip entry '" + name + "': " + zip_strerror(z), kHint);
    std::vector<uint8_t> bytes(st.size);
    const zip_int64_t got = bytes.empty() ? 0 : zip_fread(f, bytes.data(), st.size);
    zip_fclose(f);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
      fail_input(path, "zip entry '" + name + "' is truncated or corrupt", kHint);
    return bytes;
  };
  const zip_int64_t n = zip_get_num_entries(z, 0);
  std::string prefix;
  zip_int64_t pkl = -1;
  for (zip_int64_t k = 0; k < n; ++k) {
    const char* nm = zip_get_name(z, static_cast<zip_uint64_t>(k), 0);
    if (!nm) continue;
    const std::string s = nm;
    if (s == "data.pkl" || (s.size() > 9 && s.compare(s.size() - 9, 9, "/data.pkl") == 0)) {
      if (pkl >= 0) fail_input(path, "holds two data.pkl entries", kHint);
      pkl = k;
      prefix = s.substr(0, s.size() - 8);  // "archive/" (or "")
    }
  }
  if (pkl < 0) fail_input(path, "is a zip archive without a data.pkl entry (not a torch.save file)", kHint);
  TorchFile t;
  t.path = path;
  t.container = "zip";
  const std::vector<uint8_t> bytes = read_entry(pkl, prefix + "data.pkl");
  t.root = pickle::parse_pickle(bytes.data(), bytes.size(), path + ": " + prefix + "data.pkl");
  const std::string data_prefix = prefix + "data/";
  for (zip_int64_t k = 0; k < n; ++k) {
    const char* nm = zip_get_name(z, static_cast<zip_uint64_t>(k), 0);
    if (!nm) continue;
    const std::string s = nm;
    if (s.rfind(data_prefix, 0) == 0 && s.size() > data_prefix.size())
      t.storages[s.substr(data_prefix.size())] = read_entry(k, s);
  }
  return t;
}

TorchFile load_legacy(const std::string& path) {
  const std::vector<uint8_t> bytes = read_all(path);
  size_t at = 0;
  auto next = [&](const char* what) {
    size_t used = 0;
    auto v = pickle::parse_pickle(bytes.data() + at, bytes.size() - at,
                                  path + " (legacy container, " + what + " at byte " + std::to_string(at) + ")", &used);
    at += used;
    return v;
  };
  const auto magic = next("magic number");
  static const char kMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
  if (magic->kind != pickle::Kind::Int || magic->s != std::string(kMagic, 10))
    fail_input(path, "is a pickle but not a torch.save file (no legacy magic number)", kHint);
  const auto proto = next("protocol version");
  if (proto->kind != pickle::Kind::Int || proto->i != 1001)
    fail_input(path, "legacy torch.save protocol " + proto->repr() + " (this reader knows 1001)", kHint);
  next("sys_info");
  TorchFile t;
  t.path = path;
  t.container = "legacy";
  t.root = next("object");
  const auto keys = next("storage keys");
  if (keys->kind != pickle::Kind::List) fail_input(path, "legacy storage key list is a " + std::string(pickle::kind_name(keys->kind)), kHint);
  std::map<std::string, std::string> dtypes;  // key → storage type, from the tensors that use it
  std::vector<const pickle::Value*> todo{t.root.get()};
  size_t visited = 0;
  while (!todo.empty() && visited < 10'000'000) {
    const pickle::Value* v = todo.back();
    todo.pop_back();
    ++visited;
    if (v->kind == pickle::Kind::Tensor) dtypes[v->tensor.storage.key] = v->tensor.storage.dtype;
    if (v->kind == pickle::Kind::Storage) dtypes[v->storage.key] = v->storage.dtype;
    for (const auto& x : v->items) todo.push_back(x.get());
    for (const auto& kv : v->dict) todo.push_back(kv.second.get());
  }
  for (const auto& k : keys->items) {
    if (k->kind != pickle::Kind::String) fail_input(path, "legacy storage key " + k->repr() + " is not a string", kHint);
    auto dt = dtypes.find(k->s);
    if (dt == dtypes.end()) fail_input(path, "legacy storage '" + k->s + "' is used by no tensor", kHint);
    const size_t es = element_size(dt->second, path, "storage " + k->s);
    if (bytes.size() - at < 8) fail_input(path, "legacy storage '" + k->s + "' truncated at byte " + std::to_string(at), kHint);
    int64_t numel = 0;
    std::memcpy(&numel, bytes.data() + at, 8);
    at += 8;
    if (numel < 0 || static_cast<uint64_t>(numel) > (bytes.size() - at) / es)
      fail_input(path, "legacy storage '" + k->s + "' claims " + std::to_string(numel) + " elements at byte " +
                           std::to_string(at) + ", past the end (truncated?)", kHint);
    const size_t n = static_cast<size_t>(numel) * es;
    t.storages[k->s].assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return t;
}

}  // namespace

std::string torch_file_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char m[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(m), 4);
  if (m[0] == 'P' && m[1] == 'K' && m[2] == 3 && m[3] == 4) return "zip archive";
  if (m[0] == 0x80 && m[1] >= 2 && m[1] <= 5) return "pickle";
  return "";
}

bool looks_like_torch_file(const std::string& path) { return !torch_file_kind(path).empty(); }

TorchFile load_torch_file(const std::string& path) {
  if (!std::filesystem::exists(path)) fail_input(path, "not found", "check the path");
  std::ifstream in(path, std::ios::binary);
  unsigned char m[2] = {0, 0};
  in.read(reinterpret_cast<char*>(m), 2);
  if (m[0] == 'P' && m[1] == 'K') return load_zip(path);
  if (m[0] == 0x80) return load_legacy(path);
  fail_input(path, "is neither a zip archive nor a pickle (not a torch.save file)", kHint);
}

Tensor TorchFile::to_f32(const pickle::TensorRef& t, const std::string& name) const {
  auto it = storages.find(t.storage.key);
  if (it == storages.end()) fail_input(path, "tensor '" + name + "' refers to storage '" + t.storage.key + "', which the file lacks", kHint);
  const size_t es = element_size(t.storage.dtype, path, name);
  const std::vector<uint8_t>& raw = it->second;
  const int64_t avail = static_cast<int64_t>(raw.size() / es);
  std::vector<int64_t> dims = t.shape;
  int64_t numel = 1, last = t.offset;  // the furthest element read
  for (size_t d = 0; d < dims.size(); ++d) {
    numel *= dims[d];
    if (dims[d] > 0) last += (dims[d] - 1) * t.stride[d];
  }
  if (numel > 0 && last >= avail)
    fail_input(path, "tensor '" + name + "' reads element " + std::to_string(last) + " of a storage of " +
                         std::to_string(avail) + " (corrupt offset/stride)", kHint);
  Tensor out = Tensor::empty(Shape(dims));
  float* o = out.f32();
  auto load = [&](int64_t idx) -> float {
    const uint8_t* p = raw.data() + idx * static_cast<int64_t>(es);
    if (t.storage.dtype == "Float") {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    if (t.storage.dtype == "Half") {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    if (t.storage.dtype == "BFloat16") {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    if (t.storage.dtype == "Double") {
      double x;
      std::memcpy(&x, p, 8);
      return static_cast<float>(x);
    }
    fail_input(path, "tensor '" + name + "' is " + t.storage.dtype + ", not a floating-point weight", kHint);
  };
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t src = t.offset;
    for (size_t d = 0; d < dims.size(); ++d) src += idx[d] * t.stride[d];
    o[k] = load(src);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void save_torch_zip(const std::string& path, const std::string& prefix, const std::vector<TorchZipEntry>& entries) {
  const std::string tmp = pid_temporary(path);
  std::filesystem::remove(tmp);
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_EXCL, &err);
  if (!z) fail_io(path, "cannot create the archive", "check that the directory exists and is writable");
  for (const auto& e : entries) {
    zip_source_t* src = zip_source_buffer(z, e.bytes.data(), e.bytes.size(), 0);
    const std::string name = prefix + "/" + e.name;
    const zip_int64_t idx = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      zip_discard(z);
      std::filesystem::remove(tmp);
      fail_io(path, "cannot add '" + name + "' to the archive");
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    std::filesystem::remove(tmp);
    fail_io(path, "writing the archive failed (" + why + ")", "check free disk space");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    fail_io(path, "cannot rename the finished archive into place (" + ec.message() + ")");
  }
}

}  // namespace stretch
