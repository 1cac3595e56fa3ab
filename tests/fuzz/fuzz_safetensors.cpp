// tests/fuzz/fuzz_safetensors.cpp — the safetensors reader (tensor/safetensors.h): header length,
// JSON header, dtypes, shapes and data_offsets. Any bytes are either a file whose tensors tile the
// data section or one stretch::Error naming the byte offset; a loaded file must save and load back
// with the same tensors.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "fuzz_input.h"
#include "tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = stretch::fuzz::write_input("x.safetensors", data, size);
  stretch::SafetensorsFile f;
  try {
    f = stretch::load_safetensors(path);
  } catch (const stretch::Error&) {
    return 0;
  }
  const std::string again = stretch::fuzz::scratch_dir() + "/again.safetensors";
  try {
    stretch::save_safetensors(again, f.tensors, f.metadata);
  } catch (const stretch::Error&) {
    return 0;  // e.g. a tensor name the writer refuses (documented usage error)
  }
  const stretch::SafetensorsFile g = stretch::load_safetensors(again);
  if (g.tensors.size() != f.tensors.size() || g.metadata != f.metadata) std::abort();
  for (const auto& [name, t] : f.tensors) {
    const stretch::Tensor* u = g.find(name);
    if (!u || u->nbytes() != t.nbytes() || u->dtype() != t.dtype() ||
        (t.nbytes() > 0 && std::memcmp(u->bytes(), t.bytes(), t.nbytes()) != 0))
      std::abort();
  }
  return 0;
}
