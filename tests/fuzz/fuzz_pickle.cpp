// tests/fuzz/fuzz_pickle.cpp — the restricted pickle reader of fairseq checkpoints
// (tensor/pickle.h): any bytes are either a parsed value (built from allowlisted globals only,
// nothing executed) or one stretch::Error naming the opcode or global and the byte offset. A
// parsed value must render (repr) without failing, and `consumed` must lie inside the input.
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "tensor/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t consumed = 0;
  try {
    const stretch::pickle::ValuePtr v = stretch::pickle::parse_pickle(data, size, "fuzz/data.pkl", &consumed);
    if (!v || consumed == 0 || consumed > size) std::abort();
    (void)v->repr();
  } catch (const stretch::Error&) {
  }
  return 0;
}
