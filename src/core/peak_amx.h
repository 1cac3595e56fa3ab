// core/peak_amx.h — the AMX tile unit's bf16 rate, for core/peak_flops.h (issue 18): on a CPU with
// AMX (Intel Sapphire Rapids and later) oneDNN runs `--bf16`'s matrix products as tile products
// (tdpbf16ps), ~16x the fp32 FMA rate per core, so a bf16 MFU against the vdpbf16ps peak (half the
// fp32 rate on those CPUs) reads 2.1 where it means 0.13.
//
// Linux hands a process the AMX tile registers only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA, kernel 5.16 and later; oneDNN makes the same request): amx_tiles_permitted() makes it
// once and says whether it was granted. Without it a tile instruction faults (SIGILL).
//
// amx_chain(iters, a, b): tiles 0-3 accumulate A·B products of 16 × 32 bf16 A tiles (4, 5) and
// 32 × 16 bf16 B tiles (6, 7, in AMX's pair layout), 4 independent tdpbf16ps per round, each
// 16 · 16 · 32 multiply-adds = 16,384 FLOP: 4 accumulators cover the unit's latency. Every element
// of A is the bf16 bit pattern `a`, of B `b`, so each round adds 32 · a · b to every element of
// every accumulator, and the returned element of tile 0 is iters · 32 · a · b (exact where the
// values are powers of two and the sum is representable: the test's oracle; the peak uses tiny
// values so that no sum overflows). The tiles are configured and released inside the call.
#pragma once
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace stretch {

inline bool amx_tiles_permitted() {
  static const bool ok = [] {
#if defined(__x86_64__) && defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // <asm/prctl.h>, the kernel's xfeature number
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

constexpr double kAmxFlopPerRound = 4.0 * 16 * 16 * 32 * 2;

#if defined(__x86_64__) && (!defined(__clang__) || __clang_major__ >= 14)
// The 64-byte tile configuration (palette 1): bytes per row and rows of each of the 8 tiles.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"), no_sanitize("address", "undefined", "thread"))) inline float amx_chain(
    int64_t iters, uint16_t a, uint16_t b) {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
  alignas(64) uint16_t ta[16 * 32], tb[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) ta[i] = a, tb[i] = b;
  alignas(64) float out[16 * 16];
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ta, 64);
  _tile_loadd(5, ta, 64);
  _tile_loadd(6, tb, 64);
  _tile_loadd(7, tb, 64);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[17];
}
inline constexpr bool kAmxBuilt = true;
#else
inline float amx_chain(int64_t, uint16_t, uint16_t) { return 0; }
inline constexpr bool kAmxBuilt = false;
#endif

}  // namespace stretch
