// tensor/pickle.cpp — see pickle.h. One loop over the opcodes, a value stack with marks and a
// memo; every read is bounds-checked against the buffer and every pop against the stack.
#include "tensor/pickle.h"

#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace stretch::pickle {
namespace {

const char* const kStorageTypes[] = {"Float", "Half", "BFloat16", "Double", "Long", "Int",
                                     "Short", "Char", "Byte",     "Bool"};

bool allowed_global(const std::string& g) {
  if (g == "collections.OrderedDict" || g == "torch._utils._rebuild_tensor_v2" ||
      g == "torch._utils._rebuild_parameter" || g == "argparse.Namespace")
    return true;
  for (const char* t : kStorageTypes)
    if (g == std::string("torch.") + t + "Storage") return true;
  return false;
}

class Parser {
 public:
  Parser(const uint8_t* d, size_t n, const std::string& source) : d_(d), n_(n), source_(source) {}
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  // A pickle that failed midway may have built cycles (a list appended to itself through the
  // memo) or deep nests; dropping every value's children first frees them all without
  // recursion. A returned value was checked acyclic and shallow (check_shape); what it does not
  // reach is cleared the same way before it is released.
  ~Parser() {
    if (released_) return;
    for (const ValuePtr& v : all_) {
      v->items.clear();
      v->dict.clear();
    }
  }

  ValuePtr run(size_t* consumed) {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = u8();
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t proto = u8();
          if (proto > 5) fail(at, "pickle protocol " + std::to_string(proto) + " is not supported");
          break;
        }
        case 0x95: take(8); break;  // FRAME: the length is only a hint
        case '.': {                 // STOP
          if (stack_.size() != 1 || !marks_.empty()) fail(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
          const auto reachable = check_shape(at, stack_.back());
          for (const ValuePtr& v : all_)  // garbage the pickle built and dropped may hold cycles
            if (!reachable.count(v.get())) {
              v->items.clear();
              v->dict.clear();
            }
          if (consumed) *consumed = pos_;
          released_ = true;
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;  // MARK
        case '0': pop(at); break;                          // POP
        case '1': pop_mark(at); break;                     // POP_MARK
        case '2': push(top(at)); break;                    // DUP
        case 'N': push(make(Kind::None)); break;
        case 0x88: push_bool(true); break;   // NEWTRUE
        case 0x89: push_bool(false); break;  // NEWFALSE
        case 'J': push_int(static_cast<int32_t>(le(4))); break;  // BININT
        case 'K': push_int(static_cast<int64_t>(le(1))); break;  // BININT1
        case 'M': push_int(static_cast<int64_t>(le(2))); break;  // BININT2
        case 0x8a: {  // LONG1
          const size_t len = u8();
          const uint8_t* p = take(len);
          if (len > 8) {  // kept as bytes (the legacy container's magic number is 80 bits)
            auto big = make(Kind::Int);
            big->s.assign(reinterpret_cast<const char*>(p), len);
            push(big);
            break;
          }
          uint64_t v = 0;
          for (size_t k = 0; k < len; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
          if (len > 0 && len < 8 && (p[len - 1] & 0x80)) v |= ~uint64_t{0} << (8 * len);  // sign-extend
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian IEEE double
          const uint8_t* p = take(8);
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | p[k];
          double x;
          std::memcpy(&x, &bits, 8);
          auto v = make(Kind::Float);
          v->f = x;
          push(v);
          break;
        }
        case 'X': push_text(Kind::String, le(4)); break;     // BINUNICODE
        case 0x8c: push_text(Kind::String, le(1)); break;    // SHORT_BINUNICODE
        case 0x8d: push_text(Kind::String, le(8)); break;    // BINUNICODE8
        case 'B': push_text(Kind::Bytes, le(4)); break;      // BINBYTES
        case 'C': push_text(Kind::Bytes, le(1)); break;      // SHORT_BINBYTES
        case 'T': push_text(Kind::String, le(4)); break;     // BINSTRING (py2 str)
        case 'U': push_text(Kind::String, le(1)); break;     // SHORT_BINSTRING
        case '}': push(make(Kind::Dict)); break;             // EMPTY_DICT
        case ']': push(make(Kind::List)); break;             // EMPTY_LIST
        case ')': push(make(Kind::Tuple)); break;            // EMPTY_TUPLE
        case 't': {                                          // TUPLE
          auto v = make(Kind::Tuple);
          v->items = pop_mark(at);
          push(v);
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const size_t k = op - 0x84u;
          if (stack_.size() < k + floor()) fail(at, "tuple of " + std::to_string(k) + " on a shorter stack");
          auto v = make(Kind::Tuple);
          v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          push(v);
          break;
        }
        case 'a': {  // APPEND
          ValuePtr x = pop(at);
          list_at(at, top(at))->items.push_back(x);
          break;
        }
        case 'e': {  // APPENDS
          auto xs = pop_mark(at);
          auto& items = list_at(at, top(at))->items;
          items.insert(items.end(), xs.begin(), xs.end());
          break;
        }
        case 's': {  // SETITEM
          ValuePtr v = pop(at), k = pop(at);
          set_item(at, top(at), k, v);
          break;
        }
        case 'u': {  // SETITEMS
          auto xs = pop_mark(at);
          if (xs.size() % 2) fail(at, "SETITEMS with an odd number of values");
          ValuePtr d = top(at);
          for (size_t k = 0; k < xs.size(); k += 2) set_item(at, d, xs[k], xs[k + 1]);
          break;
        }
        case 'q': memo_[le(1)] = top(at); break;   // BINPUT
        case 'r': memo_[le(4)] = top(at); break;   // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = top(at); break;  // MEMOIZE
        case 'h': push(memo(at, le(1))); break;    // BINGET
        case 'j': push(memo(at, le(4))); break;    // LONG_BINGET
        case 'c': {                                // GLOBAL "module\nname\n"
          const std::string module = line(at), name = line(at);
          const std::string g = module + "." + name;
          if (!allowed_global(g))
            fail(at, "refers to the Python global '" + g +
                         "', which is not on the allowlist of a fairseq checkpoint (a pickle can run code; "
                         "stretch never does)");
          auto v = make(Kind::Global);
          v->s = g;
          push(v);
          break;
        }
        case 'Q': {  // BINPERSID
          ValuePtr pid = pop(at);
          push(storage(at, *pid));
          break;
        }
        case 'R': {  // REDUCE
          ValuePtr args = pop(at), fn = pop(at);
          push(reduce(at, *fn, *args));
          break;
        }
        case 0x81: {  // NEWOBJ
          ValuePtr args = pop(at), cls = pop(at);
          if (cls->kind != Kind::Global || cls->s != "argparse.Namespace")
            fail(at, "NEWOBJ of " + cls->repr() + " (only argparse.Namespace is built)");
          auto v = make(Kind::Object);
          v->s = cls->s;
          push(v);
          break;
        }
        case 'b': {  // BUILD
          ValuePtr state = pop(at);
          ValuePtr obj = top(at);
          if (state->kind != Kind::Dict) fail(at, "BUILD with a " + std::string(kind_name(state->kind)) + " state");
          if (obj->kind == Kind::Object) {
            for (auto& kv : state->dict) obj->dict.push_back(kv);
          } else if (obj->kind != Kind::Dict && obj->kind != Kind::Tensor) {
            // OrderedDict's attributes (a state dict's _metadata) and a tensor's are not data.
            fail(at, "BUILD on a " + std::string(kind_name(obj->kind)));
          }
          break;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(at, std::string("pickle opcode ") + hex + " is not one torch.save writes for a checkpoint; refused");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    fail_input(source_, "pickle at byte " + std::to_string(at) + ": " + what,
               "stretch reads fairseq checkpoints written by torch.save; this file is corrupt or holds other objects");
  }
  uint8_t u8() {
    if (pos_ >= n_) fail(pos_, "ends without STOP (truncated file?)");
    return d_[pos_++];
  }
  const uint8_t* take(size_t k) {
    if (k > n_ - pos_) fail(pos_, "wants " + std::to_string(k) + " bytes, " + std::to_string(n_ - pos_) + " left (truncated?)");
    const uint8_t* p = d_ + pos_;
    pos_ += k;
    return p;
  }
  uint64_t le(size_t k) {
    const uint8_t* p = take(k);
    uint64_t v = 0;
    for (size_t j = 0; j < k; ++j) v |= static_cast<uint64_t>(p[j]) << (8 * j);
    return v;
  }
  std::string line(size_t at) {
    const size_t start = pos_;
    while (pos_ < n_ && d_[pos_] != '\n') {
      if (pos_ - start > 256) fail(at, "GLOBAL name longer than 256 bytes");
      ++pos_;
    }
    if (pos_ >= n_) fail(at, "GLOBAL without its newline");
    std::string s(reinterpret_cast<const char*>(d_ + start), pos_ - start);
    ++pos_;
    return s;
  }
  ValuePtr make(Kind k) const {
    auto v = std::make_shared<Value>();
    v->kind = k;
    all_.push_back(v);
    return v;
  }
  // The result must be a tree or a DAG (torch.save memoizes shared objects) no deeper than
  // kMaxDepth: a cycle would leak and a deep nest would overflow the stack when freed or printed.
  // Iterative depth-first walk; colour 1 = on the current path, 2 = finished.
  std::unordered_map<const Value*, uint8_t> check_shape(size_t at, const ValuePtr& root) const {
    constexpr size_t kMaxDepth = 512;
    std::unordered_map<const Value*, uint8_t> colour;
    struct Frame {
      const Value* v;
      size_t next;
    };
    std::vector<Frame> path{{root.get(), 0}};
    colour[root.get()] = 1;
    auto child = [](const Value* v, size_t k) -> const Value* {
      if (k < v->items.size()) return v->items[k].get();
      k -= v->items.size();
      if (k / 2 < v->dict.size()) return (k % 2 == 0 ? v->dict[k / 2].first : v->dict[k / 2].second).get();
      return nullptr;
    };
    while (!path.empty()) {
      Frame& f = path.back();
      const Value* c = child(f.v, f.next++);
      if (!c) {
        colour[f.v] = 2;
        path.pop_back();
        continue;
      }
      uint8_t& col = colour[c];
      if (col == 1) fail(at, "the unpickled value contains itself (a cycle); torch.save never writes one");
      if (col == 2) continue;
      if (path.size() >= kMaxDepth) fail(at, "values nested deeper than " + std::to_string(kMaxDepth) + " levels");
      col = 1;
      path.push_back({c, 0});
    }
    return colour;
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void push_bool(bool b) {
    auto v = make(Kind::Bool);
    v->b = b;
    push(v);
  }
  void push_int(int64_t i) {
    auto v = make(Kind::Int);
    v->i = i;
    push(v);
  }
  void push_text(Kind k, uint64_t len) {
    if (len > n_ - pos_) fail(pos_, "string of " + std::to_string(len) + " bytes past the end (truncated?)");
    auto v = make(k);
    const uint8_t* p = take(static_cast<size_t>(len));
    v->s.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    push(v);
  }
  ValuePtr pop(size_t at) {
    if (stack_.size() <= floor()) fail(at, "stack underflow");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  ValuePtr top(size_t at) const {
    if (stack_.size() <= floor()) fail(at, "stack underflow");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_mark(size_t at) {
    if (marks_.empty()) fail(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> xs(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return xs;
  }
  ValuePtr memo(size_t at, uint64_t k) const {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail(at, "memo entry " + std::to_string(k) + " was never stored");
    return it->second;
  }
  Value* list_at(size_t at, const ValuePtr& v) const {
    if (v->kind != Kind::List) fail(at, std::string("APPEND to a ") + kind_name(v->kind));
    return v.get();
  }
  void set_item(size_t at, const ValuePtr& d, ValuePtr k, ValuePtr v) const {
    if (d->kind != Kind::Dict) fail(at, std::string("SETITEM on a ") + kind_name(d->kind));
    if (k->kind == Kind::String)
      for (auto& kv : d->dict)
        if (kv.first->kind == Kind::String && kv.first->s == k->s) {
          kv.second = std::move(v);
          return;
        }
    d->dict.emplace_back(std::move(k), std::move(v));
  }
  static bool is_int(const Value& v) { return v.kind == Kind::Int && v.s.empty(); }
  ValuePtr storage(size_t at, const Value& pid) const {
    const auto& t = pid.items;
    if (pid.kind != Kind::Tuple || t.size() < 5 || t[0]->kind != Kind::String || t[0]->s != "storage" ||
        t[1]->kind != Kind::Global || t[2]->kind != Kind::String || t[3]->kind != Kind::String || !is_int(*t[4]))
      fail(at, "persistent id " + pid.repr() + " is not a torch storage");
    if (t.size() > 5 && t[5]->kind != Kind::None) fail(at, "storage views (legacy view metadata) are not supported");
    const std::string& type = t[1]->s;  // torch.FloatStorage
    if (type.rfind("torch.", 0) != 0 || type.size() < 13 || type.compare(type.size() - 7, 7, "Storage") != 0)
      fail(at, "persistent id with storage type " + type);
    auto v = make(Kind::Storage);
    v->storage.dtype = type.substr(6, type.size() - 13);
    v->storage.key = t[2]->s;
    v->storage.location = t[3]->s;
    v->storage.numel = t[4]->i;
    if (v->storage.numel < 0) fail(at, "storage with " + std::to_string(v->storage.numel) + " elements");
    return v;
  }
  std::vector<int64_t> ints(size_t at, const Value& v, const char* what) const {
    if (v.kind != Kind::Tuple) fail(at, std::string("tensor ") + what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& x : v.items) {
      if (!is_int(*x) || x->i < 0) fail(at, std::string("tensor ") + what + " holds " + x->repr());
      out.push_back(x->i);
    }
    return out;
  }
  ValuePtr reduce(size_t at, const Value& fn, const Value& args) const {
    if (fn.kind != Kind::Global) fail(at, "REDUCE on a " + std::string(kind_name(fn.kind)) + ", not a global");
    if (args.kind != Kind::Tuple) fail(at, "REDUCE of " + fn.s + " without an argument tuple");
    const auto& a = args.items;
    if (fn.s == "collections.OrderedDict") {
      if (!a.empty()) fail(at, "OrderedDict built from arguments");
      return make(Kind::Dict);
    }
    if (fn.s == "argparse.Namespace") {
      if (!a.empty()) fail(at, "Namespace built from arguments");
      auto v = make(Kind::Object);
      v->s = fn.s;
      return v;
    }
    if (fn.s == "torch._utils._rebuild_parameter") {
      if (a.empty() || a[0]->kind != Kind::Tensor) fail(at, "_rebuild_parameter without a tensor");
      return a[0];
    }
    if (fn.s == "torch._utils._rebuild_tensor_v2") {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (a.size() < 4 || a[0]->kind != Kind::Storage || !is_int(*a[1]))
        fail(at, "_rebuild_tensor_v2 with arguments " + args.repr());
      auto v = make(Kind::Tensor);
      v->tensor.storage = a[0]->storage;
      v->tensor.offset = a[1]->i;
      v->tensor.shape = ints(at, *a[2], "size");
      v->tensor.stride = ints(at, *a[3], "stride");
      if (v->tensor.offset < 0 || v->tensor.shape.size() != v->tensor.stride.size())
        fail(at, "_rebuild_tensor_v2 with offset " + a[1]->repr() + ", size " + a[2]->repr() + ", stride " + a[3]->repr());
      return v;
    }
    fail(at, fn.s + " is not callable in a checkpoint");
  }

  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& source_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  mutable std::vector<ValuePtr> all_;  // every value made, for ~Parser's cycle-safe release
  bool released_ = false;
};

void repr_into(const Value& v, std::string& out, int depth) {
  if (out.size() > 200) return;
  if (depth > 8) {
    out += "...";
    return;
  }
  switch (v.kind) {
    case Kind::None: out += "None"; break;
    case Kind::Bool: out += v.b ? "True" : "False"; break;
    case Kind::Int: out += v.s.empty() ? std::to_string(v.i) : std::string("<big int>"); break;
    case Kind::Float: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", v.f);
      out += buf;
      break;
    }
    case Kind::String: out += "'" + v.s + "'"; break;
    case Kind::Bytes: out += "b'...'"; break;
    case Kind::Global: out += v.s; break;
    case Kind::Storage: out += "torch." + v.storage.dtype + "Storage(" + v.storage.key + ")"; break;
    case Kind::Tensor: out += "tensor(" + v.tensor.storage.dtype + ")"; break;
    case Kind::List: case Kind::Tuple: {
      out += v.kind == Kind::List ? "[" : "(";
      for (size_t k = 0; k < v.items.size(); ++k) {
        if (k) out += ", ";
        repr_into(*v.items[k], out, depth + 1);
      }
      out += v.kind == Kind::List ? "]" : ")";
      break;
    }
    case Kind::Dict: case Kind::Object: {
      out += v.kind == Kind::Dict ? "{" : "Namespace(";
      for (size_t k = 0; k < v.dict.size(); ++k) {
        if (k) out += ", ";
        repr_into(*v.dict[k].first, out, depth + 1);
        out += v.kind == Kind::Dict ? ": " : "=";
        repr_into(*v.dict[k].second, out, depth + 1);
      }
      out += v.kind == Kind::Dict ? "}" : ")";
      break;
    }
  }
}

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Object: return "object";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Dict && kind != Kind::Object) return nullptr;
  for (const auto& [k, v] : dict)
    if (k->kind == Kind::String && k->s == key) return v.get();
  return nullptr;
}

std::string Value::repr() const {
  std::string out;
  repr_into(*this, out, 0);
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out;
}

ValuePtr parse_pickle(const uint8_t* data, size_t size, const std::string& source, size_t* consumed) {
  return Parser(data, size, source).run(consumed);
}

}  // namespace stretch::pickle
