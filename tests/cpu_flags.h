// tests/cpu_flags.h — what this CPU and Linux allow, read independently of the code under test:
// a flag of /proc/cpuinfo's first processor, and whether Linux grants this process the AMX tiles
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA; asking twice is harmless).
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace stretch::testing {

inline bool cpuinfo_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

inline bool amx_tiles_granted() {
  return cpuinfo_has_flag("amx_bf16") && cpuinfo_has_flag("amx_tile") &&
         syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}

}  // namespace stretch::testing
