// ops/linear_schedule.cpp — linear_backward's schedule (ops/linear.h: LinearBackwardSchedule): the
// host's default, the STRETCH_LINEAR_BACKWARD override, read once.
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "ops/gemm.h"
#include "ops/linear.h"

namespace stretch::ops {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_schedule{kUnset};

LinearBackwardSchedule from_environment() {
  const char* v = std::getenv("STRETCH_LINEAR_BACKWARD");
  if (!v || !*v) return cpu_has_avx512() ? LinearBackwardSchedule::Sequential : LinearBackwardSchedule::Concurrent;
  const std::string s(v);
  if (s == "sequential") return LinearBackwardSchedule::Sequential;
  if (s == "concurrent") return LinearBackwardSchedule::Concurrent;
  throw Error(ErrorKind::Usage, "STRETCH_LINEAR_BACKWARD=" + s + " is not a schedule",
              "use STRETCH_LINEAR_BACKWARD=sequential or concurrent, or unset it for the CPU's default");
}

}  // namespace

LinearBackwardSchedule linear_backward_schedule() {
  int v = g_schedule.load(std::memory_order_relaxed);
  if (v == kUnset) {
    v = static_cast<int>(from_environment());
    int expected = kUnset;
    if (!g_schedule.compare_exchange_strong(expected, v)) v = expected;
  }
  return static_cast<LinearBackwardSchedule>(v);
}

void set_linear_backward_schedule(LinearBackwardSchedule s) { g_schedule.store(static_cast<int>(s)); }

const char* linear_backward_schedule_name(LinearBackwardSchedule s) {
  return s == LinearBackwardSchedule::Concurrent ? "concurrent" : "sequential";
}

}  // namespace stretch::ops
