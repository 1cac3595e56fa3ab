// tensor/pickle_writer.cpp — see pickle_writer.h.
#include "tensor/pickle_writer.h"

#include <cstring>

namespace stretch::pickle {

Writer::Writer() {
  op(0x80);
  op(2);
}
void Writer::le(uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out_.push_back(static_cast<uint8_t>(v >> (8 * k)));
}
void Writer::none() { op('N'); }
void Writer::boolean(bool b) { op(b ? 0x88 : 0x89); }
void Writer::integer(int64_t i) {
  if (i >= 0 && i < 256) {
    op('K');
    le(static_cast<uint64_t>(i), 1);
  } else if (i >= 0 && i < 65536) {
    op('M');
    le(static_cast<uint64_t>(i), 2);
  } else if (i >= INT32_MIN && i <= INT32_MAX) {
    op('J');
    le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(i))), 4);
  } else {
    op(0x8a);  // LONG1, 8 bytes two's complement
    op(8);
    le(static_cast<uint64_t>(i), 8);
  }
}
void Writer::real(double f) {
  op('G');
  uint64_t bits;
  std::memcpy(&bits, &f, 8);
  for (int k = 7; k >= 0; --k) out_.push_back(static_cast<uint8_t>(bits >> (8 * k)));
}
void Writer::str(const std::string& s) {
  op('X');
  le(s.size(), 4);
  out_.insert(out_.end(), s.begin(), s.end());
}
void Writer::mark() { op('('); }
void Writer::tuple_from_mark() { op('t'); }
void Writer::empty_tuple() { op(')'); }
void Writer::empty_list() { op(']'); }
void Writer::appends_from_mark() { op('e'); }
void Writer::empty_dict() { op('}'); }
void Writer::setitems_from_mark() { op('u'); }
void Writer::global(const std::string& module, const std::string& name) {
  op('c');
  out_.insert(out_.end(), module.begin(), module.end());
  op('\n');
  out_.insert(out_.end(), name.begin(), name.end());
  op('\n');
}
void Writer::reduce() { op('R'); }
void Writer::namespace_begin() {
  global("argparse", "Namespace");
  empty_tuple();
  op(0x81);  // NEWOBJ
  empty_dict();
}
void Writer::namespace_end() {
  setitems_from_mark();
  op('b');  // BUILD
}
void Writer::tensor(const std::string& storage_type, const std::string& key, int64_t numel,
                    const std::vector<int64_t>& shape) {
  global("torch._utils", "_rebuild_tensor_v2");
  mark();
  {  // persistent id ('storage', torch.<type>, key, 'cpu', numel)
    mark();
    str("storage");
    global("torch", storage_type);
    str(key);
    str("cpu");
    integer(numel);
    tuple_from_mark();
    op('Q');  // BINPERSID
  }
  integer(0);  // storage offset
  mark();
  for (int64_t d : shape) integer(d);
  tuple_from_mark();
  mark();  // contiguous strides
  std::vector<int64_t> stride(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  for (int64_t s : stride) integer(s);
  tuple_from_mark();
  boolean(false);  // requires_grad
  global("collections", "OrderedDict");
  empty_tuple();
  reduce();  // backward hooks: OrderedDict()
  tuple_from_mark();
  reduce();
}
std::vector<uint8_t> Writer::finish() {
  op('.');
  return std::move(out_);
}

}  // namespace stretch::pickle
