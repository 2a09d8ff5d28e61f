#include "kvsim/core/kv_cache_spec.h"

#include <fmt/format.h>

#include <stdexcept>
#include <unordered_set>

namespace kvsim {

std::string_view to_string(KVCacheSpecKind kind) {
  switch (kind) {
    case KVCacheSpecKind::kFullAttention:
      return "full_attention";
    case KVCacheSpecKind::kSlidingWindow:
      return "sliding_window";
    case KVCacheSpecKind::kChunkedLocalAttention:
      return "chunked_local_attention";
  }
  return "unknown";
}

KVCacheConfig make_full_attention_kv_cache_config(int32_t num_blocks, int32_t block_size,
                                                  int32_t num_layers, int64_t page_size_bytes) {
  KVCacheConfig config;
  config.num_blocks = num_blocks;
  KVCacheGroupSpec group;
  group.kv_cache_spec.kind = KVCacheSpecKind::kFullAttention;
  group.kv_cache_spec.block_size = block_size;
  group.kv_cache_spec.page_size_bytes = page_size_bytes;
  group.layer_indices.reserve(static_cast<size_t>(num_layers > 0 ? num_layers : 0));
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    group.layer_indices.push_back(layer);
    // vLLM: one tensor per layer when there is a single group (each shared by that layer only).
    config.kv_cache_tensors.push_back(
        KVCacheTensor{page_size_bytes * static_cast<int64_t>(num_blocks), {layer}});
  }
  config.kv_cache_groups.push_back(std::move(group));
  return config;
}

void validate_kv_cache_config(const KVCacheConfig& config) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("invalid KV cache config: " + what);
  };
  if (config.kv_cache_groups.empty()) fail("S1 no KV cache groups");
  if (config.num_blocks < 0) fail(fmt::format("S5 num_blocks {} < 0", config.num_blocks));
  const KVCacheSpec& first = config.kv_cache_groups.front().kv_cache_spec;
  std::unordered_set<int32_t> seen;
  for (size_t g = 0; g < config.kv_cache_groups.size(); ++g) {
    const KVCacheGroupSpec& group = config.kv_cache_groups[g];
    const KVCacheSpec& s = group.kv_cache_spec;
    if (group.layer_indices.empty()) fail(fmt::format("S1 group {} has no layers", g));
    if (s.block_size <= 0 || s.page_size_bytes <= 0) {
      fail(fmt::format("S2 group {}: block_size {} and page_size_bytes {} must be > 0", g,
                       s.block_size, s.page_size_bytes));
    }
    const bool window_ok = (s.kind == KVCacheSpecKind::kSlidingWindow) == (s.sliding_window > 0);
    const bool chunk_ok =
        (s.kind == KVCacheSpecKind::kChunkedLocalAttention) == (s.attention_chunk_size > 0);
    if (!window_ok || !chunk_ok) {
      fail(fmt::format("S2 group {} ({}): sliding_window {} attention_chunk_size {}", g,
                       to_string(s.kind), s.sliding_window, s.attention_chunk_size));
    }
    if (s.block_size != first.block_size || s.page_size_bytes != first.page_size_bytes) {
      fail(fmt::format("S3 group {}: block_size {} / page {} B differ from group 0's {} / {} B", g,
                       s.block_size, s.page_size_bytes, first.block_size, first.page_size_bytes));
    }
    for (int32_t layer : group.layer_indices) {
      if (!seen.insert(layer).second) fail(fmt::format("S4 layer {} is in two groups", layer));
    }
  }
}

}  // namespace kvsim
