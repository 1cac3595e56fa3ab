// tests/testing.h — small helpers shared by the test binaries.
#pragma once
#include <functional>
#include <string>

#include "core/error.h"

namespace stretch::testing {

// The message of the stretch::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace stretch::testing
