// Basic vocabulary shared by every kvsim room: block ids and block hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace kvsim {

// Index of a KV-cache block. It is also the physical page index in every layer's tensor.
using BlockId = int32_t;

// Block 0 is the null block (vLLM: `BlockPool.null_block`); it is never allocated or freed.
inline constexpr BlockId kNullBlockId = 0;

// Tokens per KV block when none is chosen: vLLM's default block size (CacheConfig.block_size
// on CUDA). The one definition every room's default refers to.
inline constexpr int32_t kDefaultBlockSize = 16;

// Slot id used for padded tokens (vLLM: PAD_SLOT_ID).
inline constexpr int64_t kPadSlotId = -1;

// A 128-bit prefix-cache key. Only equality matters (vLLM hashes with SHA-256 or xxh3-128;
// kvsim uses xxh3-128, which is as collision-free in practice and far faster).
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept {
    return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ULL));
  }
};

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t cdiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace kvsim
