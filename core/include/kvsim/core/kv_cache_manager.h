// KVCacheManager: vLLM v1's per-request block tables over one BlockPool, for a single
// full-attention KV-cache group (vllm/v1/core/kv_cache_manager.py + FullAttentionManager,
// v0.26 semantics; see docs/ and the spec's section 3).
//
// Contract:
//   * Request ids are dense non-negative integers; tables grow to the largest id seen.
//   * get_computed_blocks() returns the longest cached prefix, capped at
//     floor((num_tokens - 1) / block_size) blocks, stopping at the first miss.
//   * allocate_slots() either succeeds (returns the newly allocated block ids) or returns
//     std::nullopt and changes nothing.
//   * free() releases a request's blocks in reverse table order.
// Invariants (check_invariants()):
//   M1 the pool's invariants hold;
//   M2 for every non-null block, ref_cnt == number of live request tables listing it;
//   M3 no block appears twice in one request's table;
//   M4 num_cached_block[r] <= len(table[r]) and the first num_cached_block[r] blocks are cached
//      (when caching is on);
//   M5 padding bookkeeping: Σ table sizes * block_size - Σ held tokens == padding_tokens() >= 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/request.h"
#include "kvsim/core/types.h"

namespace kvsim {

struct KVCacheManagerConfig {
  int32_t num_gpu_blocks = 0;  // pool size N, null block included
  int32_t block_size = 16;
  int32_t max_model_len = 0;  // L
  bool enable_caching = true;
  double watermark = 0.0;  // fraction of N kept free when admitting (vLLM --watermark)
};

// Prefix-cache counters exactly as the vLLM 0.26.0 wheel records them (PrefixCacheStats, spec
// §5.5): one record (num_tokens, hit tokens) per get_computed_blocks() lookup - including lookups
// whose admission then fails and is retried the next step - under preempted_* when the request
// has been preempted before, else under requests/queries/hits (exclusive sets). vLLM's
// `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits` counters are `queries` / `hits`.
struct PrefixCacheStats {
  int64_t requests = 0;
  int64_t queries = 0;
  int64_t hits = 0;
  int64_t preempted_requests = 0;
  int64_t preempted_queries = 0;
  int64_t preempted_hits = 0;
};

struct ComputedBlocks {
  std::vector<BlockId> blocks;  // hit blocks, in prefix order
  int32_t num_computed_tokens = 0;
};

struct AllocateSlotsArgs {
  int32_t num_new_tokens = 0;
  int32_t num_new_computed_tokens = 0;                // local prefix-hit tokens
  std::span<const BlockId> new_computed_blocks = {};  // hit blocks from get_computed_blocks
  int32_t num_lookahead_tokens = 0;
  bool full_sequence_must_fit = false;  // vLLM scheduler_reserve_full_isl admission gate
  bool has_scheduled_reqs = true;       // scheduler passes bool(running)
};

class KVCacheManager {
 public:
  explicit KVCacheManager(const KVCacheManagerConfig& config);

  const KVCacheManagerConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int32_t watermark_blocks() const { return watermark_blocks_; }

  // With caching on, also records the lookup in prefix_cache_stats() (vLLM 0.26.0 wheel: every
  // lookup counts, whether or not the admission that follows succeeds).
  ComputedBlocks get_computed_blocks(const Request& request);
  // Same, into `out` (cleared first; its capacity is reused, so a caller that keeps one
  // ComputedBlocks across steps does not allocate per lookup).
  void get_computed_blocks(const Request& request, ComputedBlocks& out);

  // Returns the newly allocated blocks (valid until the next call) or nullopt when the request
  // does not fit. Hashes (caches) full blocks up to min(total + n, num_tokens) on success.
  std::optional<std::span<const BlockId>> allocate_slots(Request& request,
                                                         const AllocateSlotsArgs& args);

  // Registers the hashes of the request's full blocks among its first `num_tokens` tokens that
  // are not cached yet (vLLM: KVCacheManager.cache_blocks; no-op with caching off or for a
  // request holding no blocks). Async scheduling calls it when a sampled token arrives.
  void cache_blocks(const Request& request, int64_t num_tokens);

  // Frees the request's blocks in reverse order and forgets it. No-op for unknown ids.
  void free(const Request& request);

  const PrefixCacheStats& prefix_cache_stats() const { return prefix_cache_stats_; }

  std::span<const BlockId> get_block_ids(int64_t request_id) const;
  double usage() const { return block_pool_.get_usage(); }
  int32_t num_free_blocks() const { return block_pool_.get_num_free_blocks(); }
  const BlockPool& block_pool() const { return block_pool_; }
  bool reset_prefix_cache() { return block_pool_.reset_prefix_cache(); }

  // Σ over live requests of (blocks * block_size - tokens their blocks were allocated for).
  int64_t padding_tokens() const {
    return total_table_blocks_ * config_.block_size - total_held_tokens_;
  }
  int64_t held_tokens() const { return total_held_tokens_; }
  int64_t num_live_requests() const { return num_live_requests_; }

  // Throws std::logic_error naming the first broken invariant (M1..M5).
  void check_invariants() const;

 private:
  struct RequestBlocks {
    std::vector<BlockId> blocks;
    int32_t num_cached_block = -1;  // -1: not registered (vLLM: key absent from num_cached_block)
    int32_t held_tokens = 0;
    bool live = false;
  };
  RequestBlocks& state_for(int64_t request_id);
  int32_t get_num_blocks_to_allocate(const RequestBlocks& st, int64_t num_tokens,
                                     std::span<const BlockId> hits) const;
  void cache_blocks(const Request& request, RequestBlocks& st, int64_t num_tokens);
  void record_lookup(const Request& request, int32_t num_hit_tokens);

  KVCacheManagerConfig config_;
  BlockPool block_pool_;
  int32_t watermark_blocks_ = 0;
  std::vector<RequestBlocks> req_to_blocks_;
  // Tables of freed requests, kept for reuse: request ids are never reused, so without this every
  // admission would allocate a fresh table and every free would release one.
  std::vector<std::vector<BlockId>> spare_tables_;
  std::vector<BlockId> new_blocks_;
  std::vector<BlockId> free_scratch_;
  PrefixCacheStats prefix_cache_stats_;
  int64_t total_table_blocks_ = 0;
  int64_t total_held_tokens_ = 0;
  int64_t num_live_requests_ = 0;
};

}  // namespace kvsim
