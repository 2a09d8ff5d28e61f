// KV-cache specs and groups: what the planner decides about a model's KV layout and what the
// allocator (KVCacheManager and its per-group managers) is built from. Mirrors vLLM 0.26's
// vllm/v1/kv_cache_interface.py (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec,
// KVCacheGroupSpec, KVCacheTensor, KVCacheConfig) for the attention types kvsim models.
//
// A model with one attention type has one group holding every layer (the historical kvsim
// layout). A hybrid model (gpt-oss, Gemma 3, Llama 4) has several groups of equal page size that
// share one block pool; each group keeps its own block table per request
// (vllm/v1/core/kv_cache_utils.py _get_kv_cache_config_uniform_page_size).
//
// Invariants of a valid KVCacheConfig (validate_kv_cache_config() checks them):
//   S1 kv_cache_groups is non-empty and every group's layer list is non-empty;
//   S2 every spec has block_size > 0 and page_size_bytes > 0; a sliding-window spec has
//      sliding_window > 0, a chunked-local spec attention_chunk_size > 0, a full spec neither;
//   S3 all groups have the same block_size and the same page_size_bytes (vLLM's hybrid manager
//      requires one page size; kvsim models no page-size unification by padding);
//   S4 each layer index appears in at most one group;
//   S5 num_blocks >= 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim {

enum class KVCacheSpecKind {
  kFullAttention,          // FullAttentionSpec (MLA included: only the page size differs)
  kSlidingWindow,          // SlidingWindowSpec
  kChunkedLocalAttention,  // ChunkedLocalAttentionSpec
};

std::string_view to_string(KVCacheSpecKind kind);

struct KVCacheSpec {
  KVCacheSpecKind kind = KVCacheSpecKind::kFullAttention;
  int32_t block_size = kDefaultBlockSize;
  int64_t page_size_bytes = 0;       // one layer, one block (vLLM AttentionSpec.page_size_bytes)
  int32_t sliding_window = 0;        // tokens; kSlidingWindow only
  int32_t attention_chunk_size = 0;  // tokens; kChunkedLocalAttention only

  friend bool operator==(const KVCacheSpec&, const KVCacheSpec&) = default;
};

// Layers that share one block table (vLLM KVCacheGroupSpec; layer names are layer indices here).
struct KVCacheGroupSpec {
  std::vector<int32_t> layer_indices;
  KVCacheSpec kv_cache_spec;
};

// One allocation on the device (vLLM KVCacheTensor): `size_bytes` shared by the listed layers,
// one from each group at the same position.
struct KVCacheTensor {
  int64_t size_bytes = 0;
  std::vector<int32_t> shared_by;  // layer indices
};

struct KVCacheConfig {
  int32_t num_blocks = 0;  // pool size, null block included
  std::vector<KVCacheTensor> kv_cache_tensors;
  std::vector<KVCacheGroupSpec> kv_cache_groups;

  int32_t block_size() const {
    return kv_cache_groups.empty() ? 0 : kv_cache_groups[0].kv_cache_spec.block_size;
  }
  bool is_hybrid() const { return kv_cache_groups.size() > 1; }
  // One full-attention group: the layout KVCacheManager runs on its specialised path; anything
  // else (hybrid, or one window group) goes through the KVCacheCoordinator, one block table per
  // group.
  bool is_single_full_attention() const {
    return kv_cache_groups.size() == 1 &&
           kv_cache_groups[0].kv_cache_spec.kind == KVCacheSpecKind::kFullAttention;
  }
};

// One full-attention group of `num_layers` layers: the layout of every non-hybrid model.
KVCacheConfig make_full_attention_kv_cache_config(int32_t num_blocks, int32_t block_size,
                                                  int32_t num_layers, int64_t page_size_bytes);

// Throws std::invalid_argument naming the first broken invariant (S1..S5).
void validate_kv_cache_config(const KVCacheConfig& config);

}  // namespace kvsim
