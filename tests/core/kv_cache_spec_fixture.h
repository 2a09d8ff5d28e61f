// A KV cache group spec of each kind for the allocator tests: block size kBs, a 4 KiB page.
#pragma once

#include <cstdint>

#include "kvsim/core/kv_cache_spec.h"

namespace kvsim::core_test {

inline constexpr int32_t kBs = 16;

// `window`: the sliding window (kSlidingWindow) or the attention chunk (kChunkedLocalAttention).
inline KVCacheSpec spec(KVCacheSpecKind kind, int32_t window = 0) {
  KVCacheSpec s;
  s.kind = kind;
  s.block_size = kBs;
  s.page_size_bytes = 4096;
  if (kind == KVCacheSpecKind::kSlidingWindow) s.sliding_window = window;
  if (kind == KVCacheSpecKind::kChunkedLocalAttention) s.attention_chunk_size = window;
  return s;
}

}  // namespace kvsim::core_test
