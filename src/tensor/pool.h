// tensor/pool.h — a caching allocator for tensor buffers.
// Contract: buffers are 64-byte aligned and rounded up to a size class; a freed buffer goes
// back to its class's free list and is handed out again, so once the first training step has
// run, later steps of the same shapes make no heap allocation (stats() proves it in a test).
// Thread-safe. release_cached() returns everything cached to the system.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stretch {

struct PoolStats {
  uint64_t system_allocs = 0;  // calls that went to the system allocator
  uint64_t reuses = 0;         // requests served from a free list
  uint64_t bytes_in_use = 0;
  uint64_t bytes_cached = 0;
  uint64_t peak_bytes_in_use = 0;
};

void* pool_alloc(size_t bytes);
void pool_free(void* p, size_t bytes);
PoolStats pool_stats();
void pool_reset_peak();
void pool_release_cached();

}  // namespace stretch
