// tensor/pickle_writer.h — a minimal pickle (protocol 2) writer for what torch.load and fairseq
// read back: None, bools, ints, floats, strings, tuples, lists, dicts, an argparse.Namespace,
// and torch tensors as _rebuild_tensor_v2 over persistent-id storages (the zip container's
// data/<key> entries). No memo: every value is written where it appears (shared storages are
// shared by key). The output parses with tensor/pickle.h (a test).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stretch::pickle {

class Writer {
 public:
  Writer();                     // PROTO 2
  void none();
  void boolean(bool b);
  void integer(int64_t i);
  void real(double f);
  void str(const std::string& s);
  void mark();
  void tuple_from_mark();       // TUPLE
  void empty_tuple();
  void empty_list();
  void appends_from_mark();     // APPENDS onto the list below the mark
  void empty_dict();
  void setitems_from_mark();    // SETITEMS onto the dict below the mark
  void global(const std::string& module, const std::string& name);
  void reduce();
  // An argparse.Namespace: call, then mark(), key/value pairs, then namespace_end().
  void namespace_begin();
  void namespace_end();
  // A float32 or float16 tensor: storage `key` ("0", "1", ...) of `numel` elements of dtype
  // torch.FloatStorage / HalfStorage, contiguous `shape`.
  void tensor(const std::string& storage_type, const std::string& key, int64_t numel,
              const std::vector<int64_t>& shape);
  std::vector<uint8_t> finish();  // STOP

 private:
  void op(uint8_t o) { out_.push_back(o); }
  void le(uint64_t v, int n);
  std::vector<uint8_t> out_;
};

}  // namespace stretch::pickle
