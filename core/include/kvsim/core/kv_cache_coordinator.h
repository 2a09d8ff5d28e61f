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

class KVCacheCoordinator {
 public:
  // `config` must be valid (validate_kv_cache_config) and its num_blocks equal the pool's.
  KVCacheCoordinator(const KVCacheConfig& config, BlockPool& block_pool, bool enable_caching,
                     int64_t max_model_len, int64_t max_in_flight_tokens);

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
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                 int64_t max_cache_hit_length,
                                 std::vector<std::vector<BlockId>>& out) const;

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
  std::vector<std::unique_ptr<SingleTypeKVCacheManager>> managers_;
  std::vector<SpecGroup> attention_groups_;  // full attention first (stable)
  bool is_simple_hybrid_ = false;
};

}  // namespace kvsim
