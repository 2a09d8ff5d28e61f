// KVCacheCoordinator: the per-group single-type managers of one KVCacheConfig over one shared
// BlockPool (vllm/v1/core/kv_cache_coordinator.py, v0.26 semantics). One class covers vLLM's
// UnitaryKVCacheCoordinator (one group), HybridKVCacheCoordinator (several) and
// KVCacheCoordinatorNoPrefixCache (caching off: no lookup): the operations are the per-group loops
// those share, and find_longest_cache_hit() runs the hybrid fixed point, which reduces to the
// single manager's lookup for one group.
//
// KVCacheManager owns the BlockPool and drives this class for every layout except the single
// full-attention group, which it keeps on its own specialised path (same results, fewer
// indirections; tests/core/test_hybrid_kv_cache.cpp checks the two agree).
//
// Prefix-cache retention: the constructor validates the interval (vLLM
// _validate_prefix_cache_retention_interval) and hands it to every manager; only sliding-window
// managers act on it (single_type_kv_cache_manager.h). find_longest_cache_hit() also reports the
// tokens some group could hit beyond the reconciled hit (vLLM's num_uncached), from which
// KVCacheManager derives the request's shared-prefix junction.
//
// Invariants (check_invariants()):
//   C1 each manager's T1..T4 hold;
//   C2 for every block b != null, ref_cnt(b) == number of (group, request) tables listing it
//      (blocks are never shared across groups: each group allocates its own);
//   C3 the pool's I1..I4 hold.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/request.h"
#include "kvsim/core/single_type_kv_cache_manager.h"

namespace kvsim {

// vLLM 0.33 _validate_prefix_cache_retention_interval (kv_cache_coordinator.py:33-62) for
// KVCacheManagerConfig::prefix_cache_retention_interval R with kvsim's encoding (-1 = None):
// -1 is always valid; without a sliding-window group only 0 is also valid (vLLM 0.26 refused 0
// there too); otherwise R must be >= 0 and a multiple of `block_size` (the scheduler block
// size). Throws std::invalid_argument naming the parameter and the numbers. An empty
// kv_cache_groups list stands for one full-attention group.
void validate_prefix_cache_retention_interval(int32_t retention_interval, int32_t block_size,
                                              const KVCacheConfig& config);

class KVCacheCoordinator {
 public:
  // `config` must be valid (validate_kv_cache_config) and its num_blocks equal the pool's;
  // `prefix_cache_retention_interval` is validated as above.
  KVCacheCoordinator(const KVCacheConfig& config, BlockPool& block_pool, bool enable_caching,
                     int64_t max_model_len, int64_t max_in_flight_tokens,
                     int32_t prefix_cache_retention_interval = -1);

  size_t num_groups() const { return managers_.size(); }
  const SingleTypeKVCacheManager& manager(size_t group) const { return *managers_[group]; }

  // Σ over groups; `new_computed_blocks` has one list per group (or is empty: no hits).
  int64_t get_num_blocks_to_allocate(int64_t request_id, int64_t num_tokens,
                                     std::span<const std::vector<BlockId>> new_computed_blocks,
                                     int64_t total_computed_tokens, bool apply_admission_cap) const;
  // No-op for a request some group already tracks (running requests have no new hits).
  void allocate_new_computed_blocks(int64_t request_id,
                                    std::span<const std::vector<BlockId>> new_computed_blocks,
                                    int64_t num_local_computed_tokens);
  // Group by group (group 0 takes the free-queue head first); `out` gets all new ids in group
  // order and `group_ends[g]` the end of group g's ids in `out` (both cleared first).
  void allocate_new_blocks(int64_t request_id, int64_t num_tokens, std::vector<BlockId>& out,
                           std::vector<int32_t>& group_ends);
  void cache_blocks(const Request& request, int64_t num_computed_tokens);
  // Group by group, each table in reverse order.
  void free(int64_t request_id);
  void remove_skipped_blocks(int64_t request_id, int64_t processed_computed_tokens);
  // Fills out[g] for every group and returns the common hit length (vLLM's fixed point: each
  // spec group - full attention first - accepts or shortens the candidate length until none
  // shortens it; one pass when there are exactly two spec groups and the first is full).
  // `num_uncached` (if given) gets vLLM's num_uncached_common_prefix_tokens: the longest hit of
  // any group lookup the search ran (not the trims of a full-attention group already looked
  // up) minus the returned length; 0 with one group (vLLM's UnitaryKVCacheCoordinator).
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                 int64_t max_cache_hit_length,
                                 std::vector<std::vector<BlockId>>& out,
                                 int64_t* num_uncached = nullptr) const;
  int32_t prefix_cache_retention_interval() const { return retention_interval_; }

  // Throws std::logic_error naming the first broken invariant (C1..C3).
  void check_invariants() const;

 private:
  // Groups of identical specs, looked up together (vLLM: SpecGroup / attention_groups).
  struct SpecGroup {
    KVCacheSpec spec;
    std::vector<int32_t> group_ids;
  };

  BlockPool& block_pool_;
  bool enable_caching_;
  int32_t retention_interval_;
  std::vector<std::unique_ptr<SingleTypeKVCacheManager>> managers_;
  std::vector<SpecGroup> attention_groups_;  // full attention first (stable)
  bool is_simple_hybrid_ = false;
};

}  // namespace kvsim
