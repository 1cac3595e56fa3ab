// ops/attention_skip.cpp — the process-wide switch and counters of the kernel's skipping of
// negligible key tiles (ops/attention_skip.h, ops/attention.h).
#include "ops/attention_skip.h"

#include <atomic>

namespace stretch::ops {
namespace {
std::atomic<TileSkipping> g_skipping{TileSkipping::On};
std::atomic<int64_t> g_visited{0}, g_skipped{0};
}  // namespace

void set_attention_tile_skipping(TileSkipping s) { g_skipping.store(s, std::memory_order_relaxed); }
TileSkipping attention_tile_skipping() { return g_skipping.load(std::memory_order_relaxed); }

AttentionTileCounts attention_tile_counts(bool reset) {
  AttentionTileCounts c;
  c.visited = reset ? g_visited.exchange(0, std::memory_order_relaxed) : g_visited.load(std::memory_order_relaxed);
  c.skipped = reset ? g_skipped.exchange(0, std::memory_order_relaxed) : g_skipped.load(std::memory_order_relaxed);
  return c;
}

namespace attn_cpu {
void count_tiles(int64_t visited, int64_t skipped) {
  if (visited) g_visited.fetch_add(visited, std::memory_order_relaxed);
  if (skipped) g_skipped.fetch_add(skipped, std::memory_order_relaxed);
}
}  // namespace attn_cpu
}  // namespace stretch::ops
