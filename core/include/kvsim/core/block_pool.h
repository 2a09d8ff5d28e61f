// BlockPool: vLLM v1's pool of KV-cache blocks (vllm/v1/core/block_pool.py, v0.26 semantics).
//
// Block 0 is the null block: popped from the free queue at construction, never freed, cached or
// counted as usable. The free queue starts as [1, 2, ..., N-1].
//
// Allocation pops from the free-queue head; freeing (free_blocks) decrements ref counts in the
// given order, then *prepends* blocks without a hash (LIFO reuse) and *appends* hashed blocks (LRU
// eviction), each list keeping the given order. Eviction of cached blocks is lazy: a block that
// reached ref 0 keeps its hash (and stays a valid prefix hit) until get_new_blocks pops it.
//
// Ref counts: a free block's count is 0 by definition (it is in the free queue); an allocated
// block stores its count minus one (extra_refs), so a fresh allocation, count 1, writes nothing:
// get_new_blocks is a copy of ids out of the queue. The null block, never free, stores its
// count minus one as well (it starts at 0 as in vLLM, so extra_refs = -1).
//
// Invariants (checked by check_invariants()):
//   I1 ref_cnt(b) == 0 <=> b is in the free queue, for b != 0 (exactly once); a free block has
//      extra_refs == 0 and an allocated one extra_refs >= 0. The null block is never in the
//      queue.
//   I2 num_free_blocks + #{b != 0 : ref_cnt(b) > 0} == N - 1, and num_shared_blocks() ==
//      #{b != 0 : ref_cnt(b) > 1}.
//   I3 Every hashed block belongs to exactly one chain: the blocks cached under one key, linked
//      in insertion order through dup_next into a cycle (the last links back to the first; a
//      lone block links to itself). The map holds each key once, with the chain's last block as
//      its value, and every chain member records that map slot (map_slot) and carries that key.
//      Every live map slot is such a chain; num_cached_blocks() counts the hashed blocks.
//      Private blocks (cache_private_blocks) are the exception: hashed, in no chain, not in
//      the map; num_cached_blocks() counts them too.
//   I4 With caching disabled no block carries a hash.
// Memory: 32 bytes per block in arrays indexed by block id (12 B state: extra refs, chain link,
// map slot; 16 B hash; 4 B free-queue position), plus the free queue's ring of ids (4 B per slot,
// 1.25-2.5 slots per block) and the map's 8-byte slots (see block_hash_to_block_map.h).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "kvsim/core/block_hash_to_block_map.h"
#include "kvsim/core/free_kv_cache_block_queue.h"
#include "kvsim/core/types.h"

namespace kvsim {

// The prefix-cache key of a block of KV-cache group `group_id` (vLLM: BlockHashWithGroupId =
// block hash bytes + group id). Group 0's key is the block hash itself, so the single-group layout
// keys blocks exactly as before; group g > 0 mixes g into both halves with odd multipliers, so two
// groups' keys for one hash never coincide and a different (hash, group) pair collides only by
// chance (2^-128, like any two hashes).
inline BlockHash make_block_hash_with_group_id(const BlockHash& hash, int32_t group_id) {
  if (group_id == 0) return hash;
  const auto g = static_cast<uint64_t>(group_id);
  return BlockHash{hash.lo ^ (g * 0x9E3779B97F4A7C15ULL), hash.hi ^ (g * 0xC2B2AE3D27D4EB4FULL)};
}

class BlockPool {
 public:
  // Largest pool kvsim simulates: 2^27 blocks (2^31 tokens at block size 16) keep the metadata
  // at 4 GiB of host memory; real pools are a few million blocks.
  static constexpr int32_t kMaxNumGpuBlocks = 1 << 27;

  // 1 <= num_gpu_blocks <= kMaxNumGpuBlocks (the null block included). Throws
  // std::invalid_argument otherwise, before allocating anything.
  BlockPool(int32_t num_gpu_blocks, bool enable_caching);

  int32_t num_gpu_blocks() const { return num_gpu_blocks_; }
  bool enable_caching() const { return enable_caching_; }
  int32_t get_num_free_blocks() const { return free_block_queue_.num_free_blocks(); }
  // 1 - free / (N - 1); 0 when N - 1 == 0. (Inline: the replay reads it every step.)
  double get_usage() const {
    const int32_t total = num_gpu_blocks_ - 1;
    if (total <= 0) return 0.0;
    return 1.0 - static_cast<double>(get_num_free_blocks()) / static_cast<double>(total);
  }

  // Pops n blocks from the head, evicting their cached hashes, sets ref_cnt = 1 and appends the
  // ids to `out` in head order. Throws std::logic_error when n > free.
  void get_new_blocks(int32_t n, std::vector<BlockId>& out);
  // get_new_blocks(1, out)'s block, returned: the same block, eviction and state (the decode
  // that crosses into a new block takes one; issue 27). Throws std::logic_error when none is free.
  BlockId get_new_block() {
    // popleft() throws when none is free.
    const BlockId b = free_block_queue_.popleft();
    BlockState& s = state_[static_cast<size_t>(b)];
    if (s.dup_next != kUnhashed) {
      // A private block is most of what a replay's decodes reuse.
      if (evict_if_private(s)) {
        --num_cached_blocks_;
        ++num_evictions_;
      } else {
        maybe_evict_cached_block(b);
      }
    }
    return b;
  }

  // The first-inserted block cached under `hash`, if any (vLLM: get_cached_block).
  std::optional<BlockId> get_cached_block(const BlockHash& hash) const;

  // Registers `blocks[i]` under `hashes[i]` for each i (vLLM: cache_full_blocks). A block that
  // already has a hash or is the null block is skipped. Duplicate keys keep every block, in
  // insertion order (no de-duplication).
  void cache_full_blocks(std::span<const BlockId> blocks, std::span<const BlockHash> hashes);

  // Marks `blocks[i]` cached under `hashes[i]` without entering it in the prefix map: a private
  // block (see KVCacheManagerConfig::defer_private_block_hashes). It counts as cached
  // (is_cached, block_hash, num_cached_blocks), is appended to the free queue's tail when freed
  // and is evicted (counted) when reused, exactly like a block cache_full_blocks registered, but
  // get_cached_block does not find it. The caller guarantees no lookup could: the hashes are
  // salted with a request-unique salt and the owner publishes them before it could look them
  // up. Skips the null block and blocks already hashed, as cache_full_blocks does.
  void cache_private_blocks(std::span<const BlockId> blocks, std::span<const BlockHash> hashes);
  // cache_private_blocks(blocks) for blocks the caller knows are neither hashed nor the null
  // block (KVCacheManager: the blocks of a table past its cached ones, M4): a store a block.
  void cache_new_private_blocks(std::span<const BlockId> blocks) {
    if (!enable_caching_) return;
    BlockState* const state = state_.data();
    for (const BlockId b : blocks) state[static_cast<size_t>(b)].dup_next = kPrivateNoHash;
    num_cached_blocks_ += static_cast<int64_t>(blocks.size());
  }
  // The same before the hashes are known (Request::num_deferred_block_hashes): block_hash()
  // is nullopt for such a block until it is published with its hash.
  void cache_private_blocks(std::span<const BlockId> blocks) {
    if (!enable_caching_) return;
    // cache_private_block for each, the count kept in a local (a prompt's blocks: one pass with
    // a store a block).
    BlockState* const state = state_.data();
    int64_t marked = 0;
    for (const BlockId b : blocks) {
      BlockState& s = state[static_cast<size_t>(b)];
      if (b == kNullBlockId || s.dup_next != kUnhashed) continue;
      s.dup_next = kPrivateNoHash;
      ++marked;
    }
    num_cached_blocks_ += marked;
  }
  // One block of the above (inline: a decode completes one block at a time).
  void cache_private_block(BlockId b) {
    if (!enable_caching_) return;
    BlockState& s = state_[static_cast<size_t>(b)];
    if (b == kNullBlockId || s.dup_next != kUnhashed) return;
    s.dup_next = kPrivateNoHash;
    ++num_cached_blocks_;
  }
  // Enters the private blocks among `blocks` in the prefix map, in the given order (as
  // cache_full_blocks would have, had they been registered then); other blocks are left alone.
  // `hashes[i]` is blocks[i]'s hash; it is required (i < hashes.size()) for a block cached
  // without one, else std::logic_error.
  void publish_private_blocks(std::span<const BlockId> blocks,
                              std::span<const BlockHash> hashes = {});
  bool is_private(BlockId b) const { return state_[static_cast<size_t>(b)].dup_next <= kPrivate; }

  // For each block in order: unlink it from the free queue if its ref_cnt was 0 (not null),
  // then ref_cnt += 1.
  void touch(std::span<const BlockId> blocks);

  // For each block in order: ref_cnt -= 1. Blocks reaching 0 (not null) are prepended (no hash)
  // or appended (hashed) to the free queue, each group in the given order.
  void free_blocks(std::span<const BlockId> ordered_blocks);
  // free_blocks for one table's blocks, in any order the caller frees them. Precondition (the
  // caller's, not checked on the fast path): every listed block is in use (ref_cnt >= 1, so not
  // free: I1) and listed once, as a request's block table is (KVCacheManager::free). The
  // hashed blocks are then appended without the free queue's per-block "already free or listed
  // twice" test, about a third of a finished table's cost (issue 27); the shared, null and
  // hashed tests stay, and anything else takes free_blocks' own path.
  void free_held_blocks(std::span<const BlockId> ordered_blocks);
  // free_held_blocks(reversed table) for a request's table given in table order, when the
  // caller knows its layout (KVCacheManager's M3 and M4) and no block in the pool is shared: its
  // first num_hashed blocks have a hash and the rest do not, none is the null block, each is
  // listed once and held by this table only. Every count then drops to 0, so the two parts go to
  // the queue's ends, reversed, without reading any block's state or reversing the table (a
  // finished request's table is most of a replay's frees; issue 27). Throws std::logic_error
  // when a block is shared (num_shared_blocks() > 0): free_held_blocks is the caller's then.
  void free_table_blocks(std::span<const BlockId> table, size_t num_hashed);

  // Clears every hash if only the null block is in use. Returns false (and changes nothing)
  // otherwise.
  bool reset_prefix_cache();

  int32_t ref_cnt(BlockId b) const {
    return free_block_queue_.contains(b) ? 0 : state_[static_cast<size_t>(b)].extra_refs + 1;
  }
  // ref_cnt(b) == 0, without the count (b != 0: free; the null block is never free).
  bool is_free(BlockId b) const { return free_block_queue_.contains(b); }
  // Number of non-null blocks with ref_cnt > 1 (held by more than one table).
  int32_t num_shared_blocks() const { return num_shared_blocks_; }
  bool is_cached(BlockId b) const { return state_[static_cast<size_t>(b)].dup_next != kUnhashed; }
  std::optional<BlockHash> block_hash(BlockId b) const;
  // Number of blocks currently holding a hash (cached, in use or evictable).
  int64_t num_cached_blocks() const { return num_cached_blocks_; }
  // Number of cached blocks evicted by get_new_blocks since construction.
  int64_t num_evictions() const { return num_evictions_; }
  const FreeKVCacheBlockQueue& free_block_queue() const { return free_block_queue_; }

  // Throws std::logic_error naming the first broken invariant (I1..I4).
  void check_invariants() const;

 private:
  static constexpr int32_t kUnhashed = -1;  // dup_next of a block without a hash
  static constexpr int32_t kPrivate = -2;   // dup_next of a private block (hashed, not in the map)
  static constexpr int32_t kPrivateNoHash = -3;  // a private block whose hash is not stored yet
  // extra_refs of a block free_blocks_general has queued for the free list within one call (a
  // second listing in the same call is a double free).
  static constexpr int32_t kQueuedThisCall = std::numeric_limits<int32_t>::min();
  // The hot per-block fields together: allocation and free touch one 12-byte record per block.
  struct BlockState {
    // ref_cnt - 1 while allocated, 0 while free (see the header comment).
    int32_t extra_refs = 0;
    // Next block of this block's chain (the cycle of I3), or kUnhashed.
    int32_t dup_next = kUnhashed;
    // The map slot of this block's key; meaningful while hashed.
    uint32_t map_slot = 0;
  };
  // The 32 bytes per block of the header comment: state, hash, free-queue position.
  static_assert(sizeof(BlockState) + sizeof(BlockHash) + sizeof(uint32_t) == 32);
  // A popped hashed block's eviction when it is private (in no map, no chain): unhashed, and
  // true for the caller to count; false, changing nothing, for a block in the map.
  static bool evict_if_private(BlockState& s) {
    if (s.dup_next > kPrivate) return false;
    s.dup_next = kUnhashed;
    return true;
  }
  void maybe_evict_cached_block(BlockId b);
  void evict_from_shared_chain(BlockId b);
  // free_blocks' fast path: prepends the whole list if every block drops from 1 to 0 and none
  // is the null block or hashed; otherwise changes nothing and returns false. kCheckState: some
  // block may be shared or hashed, so each block's state is read (else only the queue's
  // free/duplicate test runs).
  template <bool kCheckState>
  bool free_blocks_if_all_unhashed(std::span<const BlockId> ordered_blocks);
  // free_blocks' path for a finished request's table in reverse: its unhashed blocks (the
  // partial last one) first, then hashed ones, each dropping from 1 to 0. Prepends the first,
  // appends the others, as the general path would; otherwise changes nothing and returns false.
  // kHeld: the blocks are in use and listed once (free_held_blocks), so the free queue's
  // "already free or listed twice" test is skipped for the hashed part.
  template <bool kHeld>
  bool free_blocks_if_unhashed_then_hashed(std::span<const BlockId> ordered_blocks);
  template <bool kHeld>
  void free_blocks_impl(std::span<const BlockId> ordered_blocks);
  // free_blocks, one block at a time: the reference order of decrements, pushes and errors.
  void free_blocks_general(std::span<const BlockId> ordered_blocks);

  int32_t num_gpu_blocks_;
  bool enable_caching_;
  FreeKVCacheBlockQueue free_block_queue_;
  std::vector<BlockState> state_;
  std::vector<BlockHash> hash_;
  BlockHashToBlockMap cached_block_hash_to_block_;
  std::vector<BlockId> scratch_reuse_first_;
  std::vector<BlockId> scratch_evict_last_;
  int64_t num_cached_blocks_ = 0;
  int64_t num_evictions_ = 0;
  int32_t num_shared_blocks_ = 0;
};

}  // namespace kvsim
