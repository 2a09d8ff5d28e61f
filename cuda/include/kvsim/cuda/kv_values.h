// The deterministic content of every KV element, so a pool can be verified after the fact.
//
// value(request, position, layer, head, dim, k|v) is a 64-bit mix of those fields reduced to the
// element width. It never equals the poison pattern (every byte kPoisonByte), which is what a
// never-written slot holds: pools are poisoned at creation, so "correct" can never mean "zeros".
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#include "kvsim/cuda/detail/hd.h"
#include "kvsim/cuda/kv_layout.h"

namespace kvsim {

inline constexpr uint8_t kPoisonByte = 0xA5;

KVSIM_HD inline uint64_t mix64(uint64_t x) {
  // splitmix64 finalizer: a bijection with full avalanche.
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

KVSIM_HD inline uint32_t poison_bits(int32_t elem_bytes) {
  return elem_bytes == 1 ? 0xA5u : (elem_bytes == 2 ? 0xA5A5u : 0xA5A5A5A5u);
}

// Hash of the (request, position, layer) triple; per-token work reuses it for every element.
KVSIM_HD inline uint64_t kv_token_seed(int64_t request, int32_t position, int32_t layer) {
  return mix64(static_cast<uint64_t>(request) * 0x9E3779B97F4A7C15ULL ^
               (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 20) ^
               static_cast<uint64_t>(static_cast<uint32_t>(layer)));
}

// Raw bits of element (head, dim, kv) of a token whose seed is kv_token_seed(...).
KVSIM_HD inline uint32_t kv_value_bits(uint64_t token_seed, int32_t head, int32_t dim, int32_t kv,
                                       int32_t elem_bytes) {
  const uint64_t h = mix64(token_seed + (static_cast<uint64_t>(head) << 33) +
                           (static_cast<uint64_t>(dim) << 1) + static_cast<uint64_t>(kv));
  const uint32_t mask = elem_bytes == 4 ? 0xFFFFFFFFu : ((1u << (8 * elem_bytes)) - 1u);
  uint32_t bits = static_cast<uint32_t>(h) & mask;
  if (bits == poison_bits(elem_bytes)) bits ^= 1u;
  return bits;
}

// Element access by width. Device code loads directly (rows are element-aligned); host code goes
// through memcpy so the twin stays free of aliasing UB.
KVSIM_HD inline uint32_t load_elem(const unsigned char* p, int32_t elem_bytes) {
  if (elem_bytes == 1) return *p;
#if defined(__CUDA_ARCH__)
  if (elem_bytes == 2) return *reinterpret_cast<const uint16_t*>(p);
  return *reinterpret_cast<const uint32_t*>(p);
#else
  if (elem_bytes == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

KVSIM_HD inline void store_elem(unsigned char* p, int32_t elem_bytes, uint32_t bits) {
  if (elem_bytes == 1) {
    *p = static_cast<unsigned char>(bits);
    return;
  }
#if defined(__CUDA_ARCH__)
  if (elem_bytes == 2) {
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(bits);
  } else {
    *reinterpret_cast<uint32_t*>(p) = bits;
  }
#else
  if (elem_bytes == 2) {
    const auto v = static_cast<uint16_t>(bits);
    std::memcpy(p, &v, 2);
  } else {
    std::memcpy(p, &bits, 4);
  }
#endif
}

}  // namespace kvsim
