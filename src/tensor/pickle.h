// tensor/pickle.h — a RESTRICTED reader of Python pickles, as torch.save writes them
// (protocol 2; the few protocol-4 framing opcodes are accepted too). It builds a tree of
// plain values and never executes anything: there is no import, no call, no attribute lookup.
// A GLOBAL names a callable; only the allowlist below is accepted, and each allowed global
// has one fixed meaning here (REDUCE/NEWOBJ/BUILD on it build a value, nothing runs):
//   collections.OrderedDict               → Dict (BUILD's attributes, e.g. _metadata, kept aside)
//   torch._utils._rebuild_tensor_v2       → Tensor (storage, offset, size, stride, ...)
//   torch._utils._rebuild_parameter       → the Tensor it wraps
//   torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage
//                                         → storage-type markers inside persistent ids
//   argparse.Namespace                    → Object (attributes from BUILD)
// Any other global, and any opcode not in parse()'s switch, is an Error naming it and its byte
// offset (the file's path first). Persistent ids (BINPERSID) must be torch's storage tuples
// ('storage', <storage type>, key, location, numel[, view metadata]) → Storage.
// Entry point for fuzzing: parse_pickle(bytes, size, source).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stretch::pickle {

enum class Kind : uint8_t { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict, Global, Object, Storage, Tensor };
const char* kind_name(Kind k);

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct StorageRef {
  std::string dtype{};     // torch's storage name without "Storage": Float, Half, Long, ...
  std::string key{};       // archive entry data/<key> (zip) or the legacy key
  std::string location{};  // "cpu", "cuda:0": ignored (everything is read to the CPU)
  int64_t numel = 0;
};

struct TensorRef {
  StorageRef storage{};
  int64_t offset = 0;             // in elements
  std::vector<int64_t> shape{};
  std::vector<int64_t> stride{};  // in elements
};

struct Value {
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s{};  // String, Bytes, Global ("module.name"), Object type; Int beyond 64 bits: its LE bytes
  std::vector<ValuePtr> items{};                       // List, Tuple
  std::vector<std::pair<ValuePtr, ValuePtr>> dict{};   // Dict entries in order; Object attributes
  StorageRef storage{};
  TensorRef tensor{};

  // Dict / Object lookup by string key (nullptr when absent or not a dict/object).
  const Value* get(const std::string& key) const;
  bool is_str() const { return kind == Kind::String; }
  // Python-like rendering for messages and for config conversion (short).
  std::string repr() const;
};

// Parses one pickle that starts at data[0]; `*consumed` (optional) gets the bytes up to and
// including STOP (the legacy container holds several pickles back to back). Errors name
// `source` and the byte offset.
ValuePtr parse_pickle(const uint8_t* data, size_t size, const std::string& source, size_t* consumed = nullptr);

}  // namespace stretch::pickle
