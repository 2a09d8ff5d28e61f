// SplitMix64 (Steele, Lea, Flood 2014): the routers' seeded generator. Chosen because its
// output is fully specified (std::uniform_int_distribution is implementation-defined), so a
// seed gives the same routing on every platform and compiler.
#pragma once

#include <cstdint>

namespace kvsim {

// One SplitMix64 output step of `x` (also a good 64-bit mixing function for hashing).
constexpr uint64_t splitmix64_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    const uint64_t out = splitmix64_mix(state_);
    state_ += 0x9E3779B97F4A7C15ULL;
    return out;
  }
  // Uniform in [0, n), n >= 1: rejection sampling, no modulo bias.
  uint64_t uniform(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

 private:
  uint64_t state_;
};

}  // namespace kvsim
