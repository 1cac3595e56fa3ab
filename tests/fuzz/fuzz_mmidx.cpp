// tests/fuzz/fuzz_mmidx.cpp — fairseq's MMIDIDX .idx/.bin pair (data/indexed_dataset.h). Input:
// u32 LE n | n bytes of .idx | the rest is .bin. open() must accept the pair or throw one
// stretch::Error; an opened dataset must read every item and validate its ids against a
// vocabulary of 1000 without touching memory outside the mapping.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(data[i]) << (8 * i);
  data += 4, size -= 4;
  if (n > size) n = static_cast<uint32_t>(size);
  stretch::fuzz::write_input("x.idx", data, n);
  const std::string prefix = stretch::fuzz::write_input("x.bin", data + n, size - n);
  try {
    auto ds = stretch::data::IndexedDataset::open(prefix.substr(0, prefix.size() - 4));
    for (int64_t i = 0; i < ds->num_items() && i < 4096; ++i) (void)ds->item(i);
    ds->validate_ids(1000);
  } catch (const stretch::Error&) {
  }
  return 0;
}
