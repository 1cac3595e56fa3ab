// train/test_hooks.cpp — see test_hooks.h.
#include "train/test_hooks.h"

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/signals.h"
#include "tensor/safetensors.h"

namespace stretch::train::test_hooks {
namespace {

struct WriteFaultHook {
  bool armed = false;
  int64_t at_save = 0;
  safetensors_testing::WriteFault fault;
};

const WriteFaultHook& write_fault_hook() {
  static const WriteFaultHook hook = [] {
    WriteFaultHook h;
    const char* env = std::getenv("STRETCH_TEST_WRITE_FAULT");
    if (!env || !*env) return h;
    const std::string s = env;
    const auto at = s.find('@');
    const std::string spec = s.substr(0, at);
    const std::string stage = spec.substr(0, spec.find(':'));
    using safetensors_testing::FaultStage;
    if (stage == "write") h.fault.stage = FaultStage::Write;
    else if (stage == "fsync") h.fault.stage = FaultStage::Fsync;
    else if (stage == "close") h.fault.stage = FaultStage::Close;
    else if (stage == "rename") h.fault.stage = FaultStage::Rename;
    else fail_usage("STRETCH_TEST_WRITE_FAULT: unknown stage '" + stage + "'", "write[:BYTES]|fsync|close|rename, then @N");
    try {
      if (spec.find(':') != std::string::npos) h.fault.after_bytes = std::stoll(spec.substr(spec.find(':') + 1));
      h.at_save = at == std::string::npos ? 1 : std::stoll(s.substr(at + 1));
    } catch (const std::exception&) {
      fail_usage("STRETCH_TEST_WRITE_FAULT: cannot parse '" + s + "'", "STAGE[:BYTES]@N, e.g. write:4096@2");
    }
    h.fault.error = ENOSPC;
    h.armed = true;
    return h;
  }();
  return hook;
}

int64_t stall_at() {
  static const int64_t u = [] {
    const char* env = std::getenv("STRETCH_TEST_STALL_AT_UPDATE");
    return env && *env ? std::atoll(env) : int64_t{-1};
  }();
  return u;
}

}  // namespace

void before_checkpoint_save(int64_t save_index) {
  const auto& h = write_fault_hook();
  if (h.armed && save_index == h.at_save) safetensors_testing::set_write_fault(h.fault);
}

void after_checkpoint_save() {
  if (write_fault_hook().armed) safetensors_testing::set_write_fault({});
}

void maybe_die_while_publishing() {
  static const bool die = [] {
    const char* env = std::getenv("STRETCH_TEST_DIE_WHILE_PUBLISHING");
    return env && std::string(env) == "1";
  }();
  if (die) ::raise(SIGKILL);
}

void maybe_stall(int64_t num_updates) {
  if (stall_at() < 0 || num_updates != stall_at()) return;
  std::fprintf(stderr, "stretch-test: stalled at update %lld\n", static_cast<long long>(num_updates));
  std::fflush(stderr);
  while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace stretch::train::test_hooks
