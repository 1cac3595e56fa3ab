#include "tensor/pool.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace stretch {
namespace {

struct Pool {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_lists;  // size class -> cached buffers
  PoolStats stats;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: tensors may outlive static destruction order
  return *p;
}

// Size classes: multiples of 64 bytes up to 4 KiB, then 4 steps per power of two.
size_t size_class(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  size_t p = 4096;
  while (p * 2 < bytes) p *= 2;
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

}  // namespace

void* pool_alloc(size_t bytes) {
  if (bytes == 0) bytes = 64;
  size_t cls = size_class(bytes);
  Pool& P = pool();
  {
    std::lock_guard<std::mutex> lock(P.mutex);
    auto it = P.free_lists.find(cls);
    if (it != P.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      P.stats.reuses++;
      P.stats.bytes_cached -= cls;
      P.stats.bytes_in_use += cls;
      if (P.stats.bytes_in_use > P.stats.peak_bytes_in_use) P.stats.peak_bytes_in_use = P.stats.bytes_in_use;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, cls);
  if (!p) throw std::bad_alloc();
  std::lock_guard<std::mutex> lock(P.mutex);
  P.stats.system_allocs++;
  P.stats.bytes_in_use += cls;
  if (P.stats.bytes_in_use > P.stats.peak_bytes_in_use) P.stats.peak_bytes_in_use = P.stats.bytes_in_use;
  return p;
}

void pool_free(void* p, size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 64;
  size_t cls = size_class(bytes);
  Pool& P = pool();
  std::lock_guard<std::mutex> lock(P.mutex);
  P.free_lists[cls].push_back(p);
  P.stats.bytes_in_use -= cls;
  P.stats.bytes_cached += cls;
}

PoolStats pool_stats() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  return pool().stats;
}

void pool_reset_peak() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  pool().stats.peak_bytes_in_use = pool().stats.bytes_in_use;
}

void pool_release_cached() {
  Pool& P = pool();
  std::lock_guard<std::mutex> lock(P.mutex);
  for (auto& [cls, list] : P.free_lists) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  P.stats.bytes_cached = 0;
}

}  // namespace stretch
