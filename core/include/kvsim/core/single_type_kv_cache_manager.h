// SingleTypeKVCacheManager: the block tables of one KV-cache group over the shared BlockPool
// (vllm/v1/core/single_type_kv_cache_manager.py, v0.26 semantics), with the three attention kinds
// kvsim models:
//   * FullAttentionManager: every token's KV is kept until the request finishes;
//   * SlidingWindowManager: a token older than the window (W tokens: the next token attends to
//     the last W - 1 computed ones) is never read again, get_num_skipped_tokens(c) =
//     max(0, c - W + 1);
//   * ChunkedLocalAttentionManager: a token attends only inside its chunk of C tokens,
//     get_num_skipped_tokens(c) = floor(c / C) * C.
// Skipped blocks (wholly before the first needed token) are replaced by the null block and freed
// by remove_skipped_blocks(), which KVCacheManager::allocate_slots calls at the start of every
// allocation on the processed-token basis (computed tokens minus those still in flight).
//
// Every group has the same block size (KVCacheConfig invariant S3), so the scheduler block size,
// the hash block size and the cache-hit alignment are that block size (vLLM's fine-grained
// partial-hash path never applies) and EAGLE is not modelled (use_eagle = false).
//
// Prefix-cache retention (vLLM SlidingWindowManager.reachable_block_mask, v0.26
// single_type_kv_cache_manager.py:970-1029, v0.33 :1067-1146; the interval is vLLM 0.33's
// --prefix-cache-retention-interval, KVCacheManagerConfig::prefix_cache_retention_interval R):
// cache_blocks() hashes a sliding-window group's newly full block j only if retains_block(j)
// keeps it. With need = cdiv(W - 1, block_size) (the blocks a window hit needs) and the
// request's boundaries B = {num_prompt_tokens - 1} ∪ {shared_prefix_boundary if > 0}:
//   R == -1 (None): every block (dense; vLLM 0.26's default);
//   R == 0: j iff some b in B has floor(b / bs) - need <= j < floor(b / bs) (the window tail
//           ending at that boundary);
//   R > 0 (per = R / bs): every block if need >= per, else j iff j % per >= per - need (the
//           last `need` blocks of each R-token segment) or the R == 0 rule.
// A block it drops stays unhashed for good (num_cached_block still moves past it), so when freed
// it goes to the front of the free queue (BlockPool::free_blocks). Full-attention and
// chunked-local groups are always dense.
//
// Invariants (check_invariants(), per request table):
//   T1 null blocks form a prefix of the table (removal walks back from the window edge and stops
//      at the first null; hits pad skipped blocks with nulls at the front); a full-attention table
//      holds no null block;
//   T2 no non-null block appears twice in one table;
//   T3 num_cached_block <= table length and, with caching on, among the first num_cached_block
//      blocks every non-null one that is a prefix hit (the first num_hit_blocks) or that
//      retains_block() keeps for the boundaries cache_blocks() used is cached, and every other
//      non-null one is not (a dropped block is never hashed). When a request's boundaries
//      changed between cache_blocks() calls (the scheduler never does that: it sets
//      shared_prefix_boundary only at a lookup, before the request holds blocks) only the
//      length bound is checked for it. Dense groups keep every block, so there T3 reads "every
//      non-null block among the first num_cached_block is cached";
//   T4 the counters equal the tables: Σ lengths == num_table_blocks(), Σ nulls ==
//   num_null_blocks().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/request.h"
#include "kvsim/core/types.h"

namespace kvsim {

class SingleTypeKVCacheManager {
 public:
  // `max_admission_blocks_per_request` < 0: no admission cap (full attention).
  // `prefix_cache_retention_interval`: R above (-1, 0 or a positive multiple of block_size; the
  // coordinator validates it); only a sliding-window group acts on it.
  SingleTypeKVCacheManager(const KVCacheSpec& spec, BlockPool& block_pool, bool enable_caching,
                           int32_t kv_cache_group_id, int64_t max_admission_blocks_per_request,
                           int32_t prefix_cache_retention_interval = -1);
  virtual ~SingleTypeKVCacheManager() = default;
  SingleTypeKVCacheManager(const SingleTypeKVCacheManager&) = delete;
  SingleTypeKVCacheManager& operator=(const SingleTypeKVCacheManager&) = delete;

  const KVCacheSpec& kv_cache_spec() const { return spec_; }
  int32_t block_size() const { return spec_.block_size; }
  int32_t kv_cache_group_id() const { return group_id_; }
  int64_t max_admission_blocks_per_request() const { return max_admission_blocks_; }

  // Blocks `num_tokens` slots need beyond what the request holds (vLLM:
  // get_num_blocks_to_allocate): skipped blocks are not needed, hit blocks that are free
  // (evictable) consume free capacity, and `apply_admission_cap` caps the requirement at the
  // window-aware per-request reservation.
  int64_t get_num_blocks_to_allocate(int64_t request_id, int64_t num_tokens,
                                     std::span<const BlockId> new_computed_blocks,
                                     int64_t total_computed_tokens, bool apply_admission_cap) const;
  // First allocation of a request with prefix hits: skipped hit blocks become null blocks, the
  // rest are touched (vLLM: add_local_computed_blocks).
  void add_local_computed_blocks(int64_t request_id, std::span<const BlockId> new_computed_blocks,
                                 int64_t num_local_computed_tokens);
  // Grows the table to cdiv(num_tokens, block_size) blocks; appends the new ids to `out`.
  void allocate_new_blocks(int64_t request_id, int64_t num_tokens, std::vector<BlockId>& out);
  // Registers the full blocks among the first `num_tokens` tokens (null blocks and blocks
  // retains_block() drops skipped) under this group's keys (vLLM: cache_blocks).
  void cache_blocks(const Request& request, int64_t num_tokens);
  // Whether cache_blocks() hashes block `block_index` of a request with `num_prompt_tokens`
  // prompt tokens and shared-prefix junction `shared_prefix_boundary` (0: none): the retention
  // rule above (vLLM's reachable_block_mask in closed form, no EAGLE, alignment = block size).
  bool retains_block(int64_t block_index, int64_t num_prompt_tokens,
                     int64_t shared_prefix_boundary) const {
    if (!sparse_retention_) return true;
    if (retention_segment_blocks_ > 0 &&
        block_index % retention_segment_blocks_ >= retention_segment_blocks_ - retention_need_) {
      return true;
    }
    return in_tail(block_index, num_prompt_tokens - 1) ||
           (shared_prefix_boundary != 0 && in_tail(block_index, shared_prefix_boundary));
  }
  // True when some block may be dropped: a sliding-window group with R >= 0 whose segments (if
  // R > 0) are longer than a window hit.
  bool sparse_retention() const { return sparse_retention_; }
  int32_t prefix_cache_retention_interval() const { return retention_interval_; }
  // Frees the table in reverse order and forgets the request.
  void free(int64_t request_id);
  // Replaces the blocks wholly before the window of the next token by the null block and frees
  // them, last first (vLLM: remove_skipped_blocks / _remove_blocks_in_range).
  void remove_skipped_blocks(int64_t request_id, int64_t processed_computed_tokens);

  virtual int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const = 0;
  // The longest prefix hit of at most `max_length` tokens common to the groups `group_ids` (all
  // of this manager's spec): fills out[i] for group_ids[i] (skipped blocks as null blocks) and
  // returns the hit length in tokens (vLLM: find_longest_cache_hit, a classmethod there).
  virtual int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                         int64_t max_length, std::span<const int32_t> group_ids,
                                         std::span<std::vector<BlockId>> out) const = 0;

  bool has_num_cached_block(int64_t request_id) const;
  std::span<const BlockId> get_blocks(int64_t request_id) const;
  // Table entries over all requests (null blocks included), the null ones among them, and the
  // blocks remove_skipped_blocks has freed since construction.
  int64_t num_table_blocks() const { return num_table_blocks_; }
  int64_t num_null_blocks() const { return num_null_blocks_; }
  int64_t num_held_blocks() const { return num_table_blocks_ - num_null_blocks_; }
  int64_t num_skipped_blocks_freed() const { return num_skipped_blocks_freed_; }

  // Adds each non-null table entry to refs[block] (size N) and checks T1..T4; throws
  // std::logic_error naming the group, request and invariant.
  void check_invariants(std::vector<int32_t>& refs) const;

 protected:
  struct RequestState {
    std::vector<BlockId> blocks;
    int32_t num_cached_block = -1;  // -1: absent from vLLM's num_cached_block
    // T3's bookkeeping (sparse retention only): the table's prefix-hit blocks and the
    // boundaries of the last cache_blocks() call (-1: none yet, -2: they changed).
    int32_t num_hit_blocks = 0;
    int32_t retained_prompt_tokens = -1;
    int32_t retained_junction = 0;
  };
  const RequestState* find(int64_t request_id) const;
  RequestState& state_for(int64_t request_id);
  // Cached block of each group for `hash`, or false when any group misses (vLLM:
  // BlockPool.get_cached_block with several group ids).
  bool get_cached_block(const BlockHash& hash, std::span<const int32_t> group_ids,
                        std::span<BlockId> out) const;

  KVCacheSpec spec_;
  BlockPool& block_pool_;
  bool enable_caching_;
  int32_t group_id_;
  int64_t max_admission_blocks_;

 private:
  // Block j ends within the `need`-block tail before boundary b (Python's floor division: a
  // negative b, from an empty prompt, keeps nothing either way).
  bool in_tail(int64_t j, int64_t boundary) const {
    const int64_t end = boundary >= 0 ? boundary / spec_.block_size : -1;
    return j >= end - retention_need_ && j < end;
  }

  int32_t retention_interval_ = -1;
  bool sparse_retention_ = false;
  int64_t retention_need_ = 0;            // cdiv(W - 1, block_size)
  int64_t retention_segment_blocks_ = 0;  // R / block_size; 0 when R == 0
  std::vector<RequestState> req_to_blocks_;
  std::vector<BlockId> scratch_blocks_;
  std::vector<BlockHash> scratch_hashes_;
  int64_t num_table_blocks_ = 0;
  int64_t num_null_blocks_ = 0;
  int64_t num_skipped_blocks_freed_ = 0;
};

class FullAttentionManager final : public SingleTypeKVCacheManager {
 public:
  using SingleTypeKVCacheManager::SingleTypeKVCacheManager;
  int64_t get_num_skipped_tokens(int64_t) const override { return 0; }
  // Left to right: the first miss ends the hit (chained hashes).
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes, int64_t max_length,
                                 std::span<const int32_t> group_ids,
                                 std::span<std::vector<BlockId>> out) const override;
};

class SlidingWindowManager final : public SingleTypeKVCacheManager {
 public:
  using SingleTypeKVCacheManager::SingleTypeKVCacheManager;
  int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const override;
  // Right to left: the first run of cdiv(W - 1, block_size) consecutive cached blocks ends the
  // hit; blocks before the run are null. Without such a run, the cached run from block 0.
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes, int64_t max_length,
                                 std::span<const int32_t> group_ids,
                                 std::span<std::vector<BlockId>> out) const override;
};

class ChunkedLocalAttentionManager final : public SingleTypeKVCacheManager {
 public:
  using SingleTypeKVCacheManager::SingleTypeKVCacheManager;
  int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const override;
  // Blocks before the chunk holding position max_length are null (computed by definition); the
  // chunk's blocks are looked up left to right.
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes, int64_t max_length,
                                 std::span<const int32_t> group_ids,
                                 std::span<std::vector<BlockId>> out) const override;
};

// vLLM's SlidingWindowSpec / ChunkedLocalAttentionSpec .max_admission_blocks_per_request; -1 for
// full attention (no cap).
int64_t max_admission_blocks_per_request(const KVCacheSpec& spec, int64_t max_in_flight_tokens,
                                         int64_t max_model_len);

// The manager for `spec`'s kind (vLLM: get_manager_for_kv_cache_spec).
std::unique_ptr<SingleTypeKVCacheManager> make_single_type_kv_cache_manager(
    const KVCacheSpec& spec, BlockPool& block_pool, bool enable_caching, int32_t kv_cache_group_id,
    int64_t max_in_flight_tokens, int64_t max_model_len,
    int32_t prefix_cache_retention_interval = -1);

}  // namespace kvsim
