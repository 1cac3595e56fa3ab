// core/rng.h — counter-based random numbers (Philox-4x32-10).
// Contract: a value depends only on (seed, stream, counter), never on thread count or call
// order, so dropout masks and shuffles are reproducible from the seed whatever --threads is.
// Streams separate uses (each dropout site, data shuffling, init) so they never overlap.
#pragma once
#include <array>
#include <cstdint>

namespace stretch {

// Philox4x32-10 (Salmon et al., SC'11): 4 x uint32 outputs per (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);
// The same function for n consecutive counters: out [n, 4], row i = philox4x32(key, counter_hi,
// counter_lo0 + i). Lanes of 16 (AVX-512) or 8 (AVX2) counters run side by side (SIMD); bitwise equal
// to the scalar form.
void philox4x32_blocks(uint64_t key, uint64_t counter_hi, uint64_t counter_lo0, int64_t n, uint32_t* out);

// Uniform float in [0, 1) from 24 random bits.
inline float uint_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

// A seedable sequential generator over Philox for host-side uses (init, shuffles).
// State is (seed, stream, offset): saving those three restores it exactly.
class Rng {
 public:
  Rng(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}
  uint32_t next_u32();
  uint64_t next_u64() { return (static_cast<uint64_t>(next_u32()) << 32) | next_u32(); }
  float uniform() { return uint_to_unit_float(next_u32()); }           // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal(float mean = 0.f, float std = 1.f);                       // Box-Muller
  uint64_t below(uint64_t n);                                            // [0, n), unbiased
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t o) { offset_ = o; }

 private:
  uint64_t seed_, stream_, offset_ = 0;
};

}  // namespace stretch
