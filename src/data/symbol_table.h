// data/symbol_table.h — the word -> id hash index behind Dictionary::index().
// Contract: an open-addressing table (linear probing, power-of-two capacity, load <= 1/2) of
// (32-bit hash tag, id) slots; keys are not copied: slot ids point into the caller's symbol
// vector, which is passed to every call, so the table stays 8 bytes per slot and a lookup
// touches the slot and the symbol's std::string (short symbols live inside it). find()
// never allocates. assign(word, id) inserts or re-points a word (fairseq's overwrite).
// The hash reads the word with at most two overlapping 8-byte (or 4-byte) loads for words
// of up to 16 bytes and never reads outside [data, data + size).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace stretch::data {

inline uint64_t hash_word(std::string_view w) {
  auto load64 = [](const char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; };
  auto load32 = [](const char* p) { uint32_t v; std::memcpy(&v, p, 4); return static_cast<uint64_t>(v); };
  auto mix = [](uint64_t a, uint64_t b) {
    const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  };
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull, k2 = 0x8ebc6af09c88c6e3ull;
  const char* p = w.data();
  size_t n = w.size();
  uint64_t a, b, seed = k2 ^ n;
  if (n <= 16) {
    if (n >= 8) {
      a = load64(p);
      b = load64(p + n - 8);
    } else if (n >= 4) {
      a = load32(p);
      b = load32(p + n - 4);
    } else if (n > 0) {
      const auto* u = reinterpret_cast<const uint8_t*>(p);
      a = (static_cast<uint64_t>(u[0]) << 16) | (static_cast<uint64_t>(u[n >> 1]) << 8) | u[n - 1];
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    while (n > 16) {
      seed = mix(load64(p) ^ k0, load64(p + 8) ^ seed);
      p += 16;
      n -= 16;
    }
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  }
  return mix(a ^ k0, b ^ seed ^ k1);
}

class SymbolTable {
 public:
  static constexpr int32_t kNotFound = -1;

  int32_t find(std::string_view w, const std::vector<std::string>& symbols) const {
    if (slots_.empty()) return kNotFound;
    const uint64_t h = hash_word(w);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.id < 0) return kNotFound;
      if (s.tag == tag && symbols[static_cast<size_t>(s.id)] == w) return s.id;
    }
  }

  void assign(std::string_view w, int32_t id, const std::vector<std::string>& symbols) {
    if ((used_ + 1) * 2 > slots_.size()) grow(symbols);
    const uint64_t h = hash_word(w);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{tag, id};
        ++used_;
        return;
      }
      if (s.tag == tag && symbols[static_cast<size_t>(s.id)] == w) {
        s.id = id;
        return;
      }
    }
  }

  void clear() {
    slots_.clear();
    used_ = 0;
    mask_ = 0;
  }

 private:
  struct Slot {
    uint32_t tag;
    int32_t id;  // -1: empty
  };
  void grow(const std::vector<std::string>& symbols) {
    std::vector<Slot> old = std::move(slots_);
    const size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    used_ = 0;
    for (const Slot& s : old)
      if (s.id >= 0) {
        const uint64_t h = hash_word(symbols[static_cast<size_t>(s.id)]);
        size_t i = h & mask_;
        while (slots_[i].id >= 0) i = (i + 1) & mask_;
        slots_[i] = s;
        ++used_;
      }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
  size_t mask_ = 0;
};

}  // namespace stretch::data
