// tensor/safetensors.h — read and write the safetensors format (what Python's
// `safetensors.safe_open` / `safetensors.torch.save_file` read and write). Checkpoints use it.
//
// Byte layout (all integers little-endian; docs/formats.md has the full description):
//   [0, 8)          u64 N: length of the JSON header in bytes
//   [8, 8+N)        JSON object, UTF-8, padded with spaces so that N % 8 == 0:
//                     { "__metadata__": { "key": "string value", ... },      (optional)
//                       "<tensor name>": { "dtype": "F32", "shape": [2, 3],
//                                          "data_offsets": [begin, end] }, ... }
//   [8+N, EOF)      the data: tensor bytes, row-major, at [8+N+begin, 8+N+end). The ranges
//                   tile the data section exactly: no gaps, no overlaps, nothing after.
// dtypes: F32, I32, BF16, I64, U8 (stretch's DType names are the safetensors names).
// The writer places tensors by element size (largest first), then name, like the reference
// writer, so each tensor is aligned to its element size.
//
// save_safetensors is ATOMIC: it writes `<path>.tmp.<pid>`, fsyncs it, and renames it over
// `path`. Every write/fsync/close/rename result is checked; on any failure the temporary
// file is removed, an existing file at `path` is left untouched, and stretch::Error names
// the path, the system's reason and what to do.
// load_safetensors validates everything before trusting it: header length against the file
// size, the JSON, dtypes, shapes, that shape × dtype size equals each byte span, and that
// the spans tile the data section; each error names the file and the byte offset.
#pragma once
#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace stretch {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using SafetensorsMetadata = std::map<std::string, std::string>;

// Writes `tensors` (unique non-empty names, none "__metadata__") and `metadata` to path.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata = {});

struct SafetensorsFile {
  std::string path;
  SafetensorsMetadata metadata;
  NamedTensors tensors;  // in data-offset order; each owns its buffer

  // nullptr when absent.
  const Tensor* find(const std::string& name) const;
  // The tensor, or stretch::Error naming the file and the missing tensor.
  const Tensor& get(const std::string& name) const;
};

SafetensorsFile load_safetensors(const std::string& path);

// The dtype's safetensors name ("F32", …) and back (false when unknown to stretch).
const char* safetensors_dtype_name(DType dtype);
bool safetensors_dtype_from_name(const std::string& name, DType* out);

// Test hook: make the writer fail as a full disk or a failing device would. Process-wide;
// set it, call save_safetensors, then reset it with set_write_fault({}).
namespace safetensors_testing {
enum class FaultStage { None, Write, Fsync, Close, Rename };
struct WriteFault {
  FaultStage stage = FaultStage::None;
  int64_t after_bytes = 0;  // FaultStage::Write: fail once this many bytes have been written
  int error = ENOSPC;       // errno reported by the failing call
};
void set_write_fault(const WriteFault& fault);
}  // namespace safetensors_testing

}  // namespace stretch
