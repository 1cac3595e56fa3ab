// tensor/torch_file.h — read and write PyTorch's torch.save containers without Python.
// Reading (load_torch_file):
//   zip (torch >= 1.6): entries "<prefix>/data.pkl" and "<prefix>/data/<key>" — the prefix is
//     the file's stem at save time and varies, so it is taken from the entry ending in
//     "data.pkl"; read with libzip (entries STORED or deflated).
//   legacy (pre-1.6, _use_new_zipfile_serialization=False): pickles back to back — the magic
//     number 0x1950a86a20f9469cfc6c, protocol 1001, sys_info, the object, then the list of
//     storage keys — followed, per key in that order, by a little-endian int64 element count
//     and the raw bytes.
//   The object is parsed by tensor/pickle.h (restricted: it never executes anything).
// Tensors: to_f32() copies a TensorRef out of its storage honouring offset and strides (bounds
// checked), converting Half/BFloat16/Double to F32; two tensors may share one storage (tied
// weights saved twice).
// Writing (save_torch_zip): what torch.load reads — a zip of STORED entries
// "<prefix>/data.pkl", "<prefix>/version" ("3") and "<prefix>/data/<k>"; the pickle is made by
// the caller (tensor/pickle_writer.h). Atomic: a temporary next to `path`, renamed over it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tensor/pickle.h"
#include "tensor/tensor.h"

namespace stretch {

struct TorchFile {
  std::string path;
  std::string container;                          // "zip" or "legacy"
  pickle::ValuePtr root;                          // the object torch.save was given
  std::map<std::string, std::vector<uint8_t>> storages;  // key → raw bytes

  // The tensor as contiguous F32; errors name the file and `name`.
  Tensor to_f32(const pickle::TensorRef& t, const std::string& name) const;
};

// True when the file starts like a torch.save container (zip or protocol-2+ pickle).
bool looks_like_torch_file(const std::string& path);
// "zip archive", "pickle", or "" (not a torch.save container): for messages.
std::string torch_file_kind(const std::string& path);
TorchFile load_torch_file(const std::string& path);

struct TorchZipEntry {
  std::string name;  // below the prefix: "data.pkl", "version", "data/0"
  std::vector<uint8_t> bytes;
};
void save_torch_zip(const std::string& path, const std::string& prefix, const std::vector<TorchZipEntry>& entries);

}  // namespace stretch
