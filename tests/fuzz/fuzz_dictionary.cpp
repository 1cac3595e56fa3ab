// tests/fuzz/fuzz_dictionary.cpp — dict.txt parsing (data/dictionary.h): any bytes are either a
// dictionary or one stretch::Error naming the line. A parsed dictionary must encode a line of its
// own input and hash without failing, and its dict.txt text must parse back to the same symbols
// unless "#fairseq:overwrite" lines made duplicates (whose flag the text does not keep).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "data/dictionary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using stretch::data::Dictionary;
  try {
    const Dictionary d = Dictionary::parse(text, "fuzz/dict.txt");
    (void)d.content_hash();
    (void)d.encode_line(text.substr(0, text.find('\n')));
    if (text.find(Dictionary::kOverwriteFlag) == std::string_view::npos) {
      const Dictionary back = Dictionary::parse(d.to_text(), "fuzz/dict.txt (saved)");
      if (back.size() != d.size() || back.content_hash() != d.content_hash()) std::abort();
    }
  } catch (const stretch::Error&) {
  }
  return 0;
}
