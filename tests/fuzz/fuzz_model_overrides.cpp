// tests/fuzz/fuzz_model_overrides.cpp — --model-overrides, fairseq's Python dict literal
// (cli/overrides.h): any text is a JSON object or one stretch::Error (a usage error naming
// --model-overrides).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cli/overrides.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j = stretch::cli::parse_model_overrides(std::string(reinterpret_cast<const char*>(data), size));
    if (!j.is_object()) std::abort();
    (void)j.dump();
  } catch (const stretch::Error& e) {
    if (e.kind() != stretch::ErrorKind::Usage) std::abort();
  }
  return 0;
}
