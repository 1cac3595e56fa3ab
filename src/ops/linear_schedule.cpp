// ops/linear_schedule.cpp — linear_backward's schedule (ops/linear.h: LinearBackwardSchedule): the
// host's default, the STRETCH_LINEAR_BACKWARD override, read once.
#include <cstdlib>
#include <string>

#include "core/cached_setting.h"
#include "core/error.h"
#include "ops/gemm.h"
#include "ops/linear.h"

namespace stretch::ops {
namespace {

CachedSetting<LinearBackwardSchedule> g_schedule;

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

LinearBackwardSchedule linear_backward_schedule() { return g_schedule.get(from_environment); }

void set_linear_backward_schedule(LinearBackwardSchedule s) { g_schedule.set(s); }

const char* linear_backward_schedule_name(LinearBackwardSchedule s) {
  return s == LinearBackwardSchedule::Concurrent ? "concurrent" : "sequential";
}

}  // namespace stretch::ops
