// KVCacheManager: vLLM v1's per-request block tables over one BlockPool
// (vllm/v1/core/kv_cache_manager.py, v0.26 semantics: KVCacheManager.get_computed_blocks,
// allocate_slots, free; see docs/allocator.md).
//
// Layouts: a single full-attention group (every non-hybrid model; config.kv_cache_config empty
// or one full-attention group) runs on this class's own specialised path (vLLM's
// UnitaryKVCacheCoordinator + FullAttentionManager). Any other layout - hybrid models (gpt-oss,
// Gemma 3, Llama 4) or a single sliding-window/chunked-local group - is driven through a
// KVCacheCoordinator (kv_cache_coordinator.h) over per-group SingleTypeKVCacheManagers sharing
// this class's BlockPool; there allocate_slots() also frees the blocks that fell out of each
// request's window (processed tokens only: Request::num_in_flight_tokens are not yet processed)
// before checking capacity, so a failed allocation may still have freed such blocks.
//
// Contract:
//   * Request ids are dense non-negative integers; tables grow to the largest id seen.
//   * get_computed_blocks() returns the longest cached prefix, capped at
//     floor((num_tokens - 1) / block_size) blocks, stopping at the first miss.
//   * allocate_slots() either succeeds (returns the newly allocated block ids) or returns
//     std::nullopt and changes nothing (coordinated layouts: except the window frees above).
//   * free() releases a request's blocks in reverse table order.
// Invariants (check_invariants()):
//   M1 the pool's invariants hold;
//   M2 for every non-null block, ref_cnt == number of live request tables listing it;
//   M3 no block appears twice in one request's table;
//   M4 num_cached_block[r] <= len(table[r]); with caching on, the first num_cached_block[r]
//      blocks are cached, the rest are not (a block past them came fresh from the pool), and no
//      table lists the null block;
//   M5 padding bookkeeping: Σ table sizes * block_size - Σ held tokens == padding_tokens() >= 0.
// Coordinated layouts check the coordinator's C1..C3 instead of M2..M4 (M5 summed over groups).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvsim/core/block_pool.h"
#include "kvsim/core/kv_cache_coordinator.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/request.h"
#include "kvsim/core/types.h"

namespace kvsim {

struct KVCacheManagerConfig {
  int32_t num_gpu_blocks = 0;  // pool size N, null block included
  int32_t block_size = kDefaultBlockSize;
  int32_t max_model_len = 0;  // L
  bool enable_caching = true;
  double watermark = 0.0;  // fraction of N kept free when admitting (vLLM --watermark)
  // The KV layout. Empty kv_cache_groups: one full-attention group of num_gpu_blocks blocks of
  // block_size tokens. Otherwise its num_blocks and block size must equal the fields above.
  KVCacheConfig kv_cache_config = {};
  // Tokens scheduled but not yet processed at most (vLLM VllmConfig.max_in_flight_tokens =
  // max_concurrent_batches * max_num_batched_tokens): sizes the admission cap of window groups.
  // 0: max_model_len (vLLM's fallback when unset).
  int64_t max_in_flight_tokens = 0;
  // Single full-attention layout: cache a request's salted block hashes (Request::
  // first_private_block_hash onwards) as BlockPool private blocks - hashed, appended to the free
  // queue's tail and evicted like any cached block, but not entered in the prefix map until the
  // request is freed without finishing (preempted), the only time its own later lookup can hit
  // them. Nothing a lookup, a counter or a block id shows differs from eager caching (docs/
  // allocator-speed.md); it saves a map insert and erase per generated block. Off by default
  // so that a caller probing BlockPool::get_cached_block for any hash sees vLLM's map; the
  // Scheduler turns it on.
  bool defer_private_block_hashes = false;
  // VllmBehavior::prefix_cache_stats_at_admission (vLLM 0.33): get_computed_blocks() records
  // nothing; the scheduler calls record_prefix_cache_stats() once allocate_slots() admitted the
  // request. False (0.26): every get_computed_blocks() lookup records.
  bool prefix_cache_stats_at_admission = false;
  // Sliding-window groups' prefix-cache retention (vLLM 0.33 --prefix-cache-retention-interval;
  // 0.26 VLLM_PREFIX_CACHE_RETENTION_INTERVAL): -1 (None) = dense, every full block is hashed;
  // 0 = sparse, only the window tails before the prompt's replay boundary (prompt - 1) and the
  // request's shared-prefix junction (Request::shared_prefix_boundary); N > 0 (a multiple of
  // block_size) = also the last cdiv(W - 1, bs) blocks of every N-token segment. Full-attention
  // and chunked-local groups are always dense.
  int32_t prefix_cache_retention_interval = -1;
};

// Prefix-cache counters exactly as vLLM records them (PrefixCacheStats in
// vllm/v1/metrics/stats.py): one record (num_tokens, hit tokens) under preempted_* when the
// request has been preempted before, else under requests/queries/hits (exclusive sets). When a
// record is made is the release's (KVCacheManagerConfig::prefix_cache_stats_at_admission): 0.26
// records every get_computed_blocks() lookup, including lookups whose admission then fails and
// is retried the next step; 0.33 records each admission that ran a lookup. vLLM's
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
  std::vector<BlockId> blocks;  // single full-attention group: hit blocks, in prefix order
  // Coordinated layouts: one list per group (skipped blocks as null blocks); `blocks` is empty.
  std::vector<std::vector<BlockId>> group_blocks;
  int32_t num_computed_tokens = 0;
  // vLLM get_computed_blocks' shared-prefix junction: hit + the tokens some group could have hit
  // beyond the reconciled hit (coordinated layouts; 0 when none). The scheduler stores it in
  // Request::shared_prefix_boundary at every lookup.
  int32_t shared_prefix_boundary = 0;
};

struct AllocateSlotsArgs {
  int32_t num_new_tokens = 0;
  int32_t num_new_computed_tokens = 0;                // local prefix-hit tokens
  std::span<const BlockId> new_computed_blocks = {};  // hit blocks from get_computed_blocks
  // Coordinated layouts: ComputedBlocks::group_blocks (empty: no hits).
  std::span<const std::vector<BlockId>> new_computed_group_blocks = {};
  int32_t num_lookahead_tokens = 0;
  bool full_sequence_must_fit = false;  // vLLM scheduler_reserve_full_isl admission gate
  bool has_scheduled_reqs = true;       // scheduler passes bool(running)
};

class KVCacheManager {
 public:
  explicit KVCacheManager(const KVCacheManagerConfig& config);

  const KVCacheManagerConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  // 1 for the single full-attention path; the group count of a coordinated layout.
  size_t num_kv_cache_groups() const { return coordinator_ ? coordinator_->num_groups() : 1; }
  // Null for the single full-attention path.
  const KVCacheCoordinator* coordinator() const { return coordinator_.get(); }
  int32_t watermark_blocks() const { return watermark_blocks_; }

  // With caching on, also records the lookup in prefix_cache_stats() (vLLM 0.26.0 wheel: every
  // lookup counts, whether or not the admission that follows succeeds).
  ComputedBlocks get_computed_blocks(const Request& request);
  // Same, into `out` (cleared first; its capacity is reused, so a caller that keeps one
  // ComputedBlocks across steps does not allocate per lookup).
  void get_computed_blocks(const Request& request, ComputedBlocks& out);

  // Returns the newly allocated blocks (valid until the next call; coordinated layouts: all
  // groups' new blocks in group order, see new_block_group_ends()) or nullopt when the request
  // does not fit. Hashes (caches) full blocks up to min(total + n, num_tokens) on success.
  // Inline: the common decode step (a running request whose new slots fit the blocks it holds,
  // no prefix hits) allocates nothing and only updates counters; see allocate_slots_fits().
  std::optional<std::span<const BlockId>> allocate_slots(Request& request,
                                                         const AllocateSlotsArgs& args) {
    if (RequestBlocks* st = fits_held_blocks(request, args); st != nullptr) {
      return allocate_slots_fits(request, args, *st);
    }
    return allocate_slots_general(request, args);
  }

  // allocate_slots() of a RUNNING request with no new prefix hits and the admission gate off
  // (the RUNNING loop's call), when its new slots fit the blocks it holds: updates the counters,
  // caches newly full blocks and returns true (allocate_slots would have returned an empty list).
  // Returns false and changes nothing otherwise; the caller then calls allocate_slots(). Takes
  // scalars, not AllocateSlotsArgs: this runs for every decoding request every step, and a
  // struct built on the stack and read back costs store-forwarding stalls.
  bool allocate_slots_in_held_blocks(const Request& request, int32_t num_new_tokens,
                                     int32_t num_lookahead_tokens) {
    RequestBlocks* st = running_state(request);
    if (st == nullptr || num_new_tokens <= 0) return false;
    const int64_t max_len = config_.max_model_len;
    const int64_t main = std::min(int64_t{request.num_computed_tokens}, max_len) + num_new_tokens;
    if (!slots_fit(*st, main + num_lookahead_tokens)) return false;
    hold_tokens_in_table(request, *st, main);
    return true;
  }

  // allocate_slots(request, {num_new_tokens = 1}) of a RUNNING request on the single path
  // whose one new slot needs exactly one new block (a decode crossing a block boundary, the
  // lazy steady decodes' event): takes the pool's next block (get_new_block), appends it to the
  // table, holds the token and caches the blocks it completes, exactly as the general path
  // would, and stores the block in *out. Returns false and changes nothing when the request is
  // not in that case or no block is free; the caller then calls allocate_slots().
  bool allocate_one_new_block(const Request& request, BlockId* out) {
    RequestBlocks* st = running_state(request);
    if (st == nullptr) return false;
    const int64_t max_len = config_.max_model_len;
    const int64_t main = std::min(int64_t{request.num_computed_tokens}, max_len) + 1;
    const int64_t slots = std::min(main, max_len);
    const int64_t blocks = static_cast<int64_t>(st->blocks.size());
    const int64_t bs = config_.block_size;
    // cdiv(slots, bs) == blocks + 1, without the division.
    if (slots <= blocks * bs || slots > (blocks + 1) * bs ||
        block_pool_.get_num_free_blocks() < 1) {
      return false;
    }
    const BlockId b = block_pool_.get_new_block();
    st->blocks.push_back(b);
    ++total_table_blocks_;
    hold_tokens_in_table(request, *st, main);
    *out = b;
    return true;
  }

  // A lazily decoded request's new-block event without settling it (the scheduler's light
  // events): its table is full, every block but the last cached, and with caching the last is
  // private with its hash deferred (Request::num_deferred_block_hashes; counted or not yet).
  // Appends a new block and marks the last one cached without a hash, as allocate_slots()
  // would; the token that needs the block stays with the caller's lazy held-token total.
  // Returns false and changes nothing when the table is not in that case or no block is free.
  bool append_block_lazily(const Request& request, BlockId* out) {
    if (coordinator_ || request.request_id < 0 ||
        static_cast<size_t>(request.request_id) >= req_to_blocks_.size() ||
        block_pool_.get_num_free_blocks() < 1) {
      return false;
    }
    RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request.request_id)];
    const auto last = static_cast<int32_t>(st.blocks.size()) - 1;
    if (!st.live || last < 0) return false;
    if (config_.enable_caching &&
        (!config_.defer_private_block_hashes || request.hash_block_size != config_.block_size ||
         st.num_cached_block != last || last < request.first_private_block_hash ||
         static_cast<int64_t>(request.block_hashes.size()) > last ||
         !(request.defer_private_block_hashes || request.num_deferred_block_hashes > 0))) {
      return false;
    }
    const BlockId b = block_pool_.get_new_block();
    if (config_.enable_caching) {
      block_pool_.cache_private_block(st.blocks[static_cast<size_t>(last)]);
      st.num_cached_block = last + 1;
    }
    st.blocks.push_back(b);
    ++total_table_blocks_;
    *out = b;
    return true;
  }

  // A hint: the scheduler is about to call allocate_slots for this request.
  void prefetch_request_state(int64_t request_id) const {
    if (request_id >= 0 && static_cast<size_t>(request_id) < req_to_blocks_.size()) {
      __builtin_prefetch(&req_to_blocks_[static_cast<size_t>(request_id)]);
    }
  }

  // Registers the hashes of the request's full blocks among its first `num_tokens` tokens that
  // are not cached yet (vLLM: KVCacheManager.cache_blocks; no-op with caching off or for a
  // request holding no blocks). Async scheduling calls it when a sampled token arrives.
  // Inline early-out: on the single path most calls complete no block.
  void cache_blocks(const Request& request, int64_t num_tokens) {
    if (!config_.enable_caching || request.request_id < 0 ||
        static_cast<size_t>(request.request_id) >= req_to_blocks_.size()) {
      return;
    }
    RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request.request_id)];
    if (!st.live) return;
    if (!coordinator_ && !completes_a_cached_block(st, num_tokens)) return;
    if (cache_one_private_block(request, st, num_tokens)) return;
    cache_blocks_held(request, st, num_tokens);
  }

  // cache_blocks() up to the tokens the request's table holds: what its allocations would have
  // cached (a scheduler that defers those marks, SchedulerConfig::lazy_cache_marks). No-op for
  // a request holding no table.
  void cache_held_blocks(const Request& request) {
    if (!config_.enable_caching || coordinator_ || request.request_id < 0 ||
        static_cast<size_t>(request.request_id) >= req_to_blocks_.size()) {
      return;
    }
    RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request.request_id)];
    const int64_t tokens = std::min<int64_t>(st.held_tokens, request.num_tokens());
    if (!st.live || !completes_a_cached_block(st, tokens)) return;
    if (cache_one_private_block(request, st, tokens)) return;
    cache_blocks_held(request, st, tokens);
  }

  // Frees the request's blocks in reverse order and forgets it. No-op for unknown ids.
  void free(const Request& request);

  const PrefixCacheStats& prefix_cache_stats() const { return prefix_cache_stats_; }
  // One PrefixCacheStats record for a lookup of `request` that hit `num_hit_tokens` tokens
  // (vLLM 0.33 KVCacheManager.record_prefix_cache_stats; no-op with caching off). The scheduler
  // calls it after admission when KVCacheManagerConfig::prefix_cache_stats_at_admission is set.
  void record_prefix_cache_stats(const Request& request, int32_t num_hit_tokens) {
    if (config_.enable_caching) record_lookup(request, num_hit_tokens);
  }

  // Group 0's table (the only one of the single full-attention path).
  std::span<const BlockId> get_block_ids(int64_t request_id) const;
  // Group `group`'s table (null blocks included).
  std::span<const BlockId> get_block_ids(int64_t request_id, size_t group) const;
  // Coordinated layouts: end offset of group g's ids in the last allocate_slots() result.
  std::span<const int32_t> new_block_group_ends() const { return new_block_group_ends_; }
  // Non-null blocks the request holds over all groups (what freeing it returns to the pool).
  int64_t num_blocks_held(int64_t request_id) const;
  // Blocks a sequence of `num_tokens` tokens holds at most at once, summed over groups: each
  // group needs cdiv(min(num_tokens, max_model_len), block_size), a window group at most its
  // admission cap. The single full-attention path: cdiv(min(num_tokens, L), block_size).
  int64_t max_blocks_for_sequence(int64_t num_tokens) const;
  double usage() const { return block_pool_.get_usage(); }
  int32_t num_free_blocks() const { return block_pool_.get_num_free_blocks(); }
  const BlockPool& block_pool() const { return block_pool_; }
  bool reset_prefix_cache() { return block_pool_.reset_prefix_cache(); }

  // Σ over live requests (and groups) of (blocks * block_size - tokens their blocks were
  // allocated for); a null block stands for block_size skipped tokens.
  int64_t padding_tokens() const {
    if (coordinator_) return coordinated_padding_tokens();
    return total_table_blocks_ * config_.block_size - total_held_tokens_;
  }
  // One group's share of padding_tokens() (the whole of it on the single path).
  int64_t padding_tokens(size_t group) const;
  // Non-null blocks in live tables of one group (the single path: all table blocks).
  int64_t num_held_blocks_in_group(size_t group) const;
  // Blocks freed because they fell out of a window since construction (0 on the single path).
  int64_t num_skipped_blocks_freed() const;
  int64_t held_tokens() const { return total_held_tokens_; }
  int64_t num_live_requests() const { return num_live_requests_; }

  // Throws std::logic_error naming the first broken invariant (M1..M5).
  void check_invariants() const;

  // Lazy steady decodes (the scheduler's lazily advanced decodes, sim/sched/scheduler.h): the
  // single full-attention path's table of a live request as the scheduler predicts its next
  // block event from it; nullopt for a coordinated layout or a request holding no table.
  struct HeldBlocksView {
    int32_t num_blocks = 0;        // table length
    int32_t num_cached_block = 0;  // blocks of the table already cached (>= 0)
    int32_t held_tokens = 0;       // tokens the table was allocated for
  };
  std::optional<HeldBlocksView> held_blocks(int64_t request_id) const {
    if (coordinator_ || request_id < 0 || static_cast<size_t>(request_id) >= req_to_blocks_.size())
      return std::nullopt;
    const RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request_id)];
    if (!st.live) return std::nullopt;
    return HeldBlocksView{static_cast<int32_t>(st.blocks.size()), std::max(st.num_cached_block, 0),
                          st.held_tokens};
  }
  // The two halves of `tokens` decode allocations that need no block and cache nothing (what
  // allocate_slots_in_held_blocks does for each of them), split so that a run of such steps
  // costs O(1) per step: add_lazy_held_tokens(tokens) moves the total (padding_tokens() stays
  // exact every step); settle_held_tokens(id, k) later adds the k tokens to that request's own
  // count. Between the two, M5 is off by the unsettled tokens, so check_invariants() must not
  // run; the scheduler settles every request before anything else reads its table.
  void add_lazy_held_tokens(int64_t tokens) { total_held_tokens_ += tokens; }
  void settle_held_tokens(int64_t request_id, int32_t tokens) {
    req_to_blocks_[static_cast<size_t>(request_id)].held_tokens += tokens;
  }

 private:
  struct RequestBlocks {
    std::vector<BlockId> blocks;
    int32_t num_cached_block = -1;  // -1: not registered (vLLM: key absent from num_cached_block)
    int32_t held_tokens = 0;
    bool live = false;
  };
  RequestBlocks& state_for(int64_t request_id);
  // The single path's fast case of allocate_slots(): the request is RUNNING and live, has no new
  // prefix hits, skips the admission gate, and its slots fit its table, so
  // get_num_blocks_to_allocate() is 0 and nothing is allocated (exactly when the general path
  // would allocate no block). Returns its state then, else nullptr.
  RequestBlocks* fits_held_blocks(const Request& request, const AllocateSlotsArgs& args) {
    if (args.num_new_tokens <= 0 || !args.new_computed_blocks.empty() ||
        args.full_sequence_must_fit) {
      return nullptr;
    }
    RequestBlocks* st = running_state(request);
    return st != nullptr && slots_fit(*st, main_tokens(request, args) + args.num_lookahead_tokens)
               ? st
               : nullptr;
  }
  // The single path's live table of a RUNNING request, else nullptr.
  RequestBlocks* running_state(const Request& request) {
    if (coordinator_ || request.status != RequestStatus::RUNNING || request.request_id < 0 ||
        static_cast<size_t>(request.request_id) >= req_to_blocks_.size()) {
      return nullptr;
    }
    RequestBlocks& st = req_to_blocks_[static_cast<size_t>(request.request_id)];
    return st.live ? &st : nullptr;
  }
  // Whether min(tokens, L) slots fit the blocks the table holds.
  bool slots_fit(const RequestBlocks& st, int64_t tokens) const {
    return std::min(tokens, int64_t{config_.max_model_len}) <=
           static_cast<int64_t>(st.blocks.size()) * config_.block_size;
  }
  // An allocation that needs no new block: the table now holds `main` tokens (capped at L), and
  // the blocks they fill are cached.
  void hold_tokens_in_table(const Request& request, RequestBlocks& st, int64_t main) {
    const int64_t held = std::min(main, int64_t{config_.max_model_len});
    if (held > st.held_tokens) {
      total_held_tokens_ += held - st.held_tokens;
      st.held_tokens = static_cast<int32_t>(held);
    }
    const int64_t cached = std::min<int64_t>(main, request.num_tokens());
    if (config_.enable_caching && completes_a_cached_block(st, cached) &&
        !cache_one_private_block(request, st, cached)) {
      cache_blocks_held(request, st, cached);
    }
  }
  // cache_blocks_held()'s usual decode case, inline: the first num_tokens tokens complete
  // exactly one block past the cached ones, private with its hash deferred (not computed), which
  // is cached without a hash. False, changing nothing, in any other case.
  bool cache_one_private_block(const Request& request, RequestBlocks& st, int64_t num_tokens) {
    const int32_t start = std::max(st.num_cached_block, 0);
    if (coordinator_ || !config_.defer_private_block_hashes ||
        request.hash_block_size != config_.block_size ||
        num_tokens >= (int64_t{start} + 2) * config_.block_size ||
        num_tokens < (int64_t{start} + 1) * config_.block_size ||
        start < request.first_private_block_hash ||
        static_cast<int64_t>(request.block_hashes.size()) > start ||
        request.num_block_hashes() <= start || static_cast<int64_t>(st.blocks.size()) <= start) {
      return false;
    }
    block_pool_.cache_private_block(st.blocks[static_cast<size_t>(start)]);
    st.num_cached_block = start + 1;
    return true;
  }
  // Tokens the request holds after this allocation: min(computed + hits, L) + new tokens.
  int64_t main_tokens(const Request& request, const AllocateSlotsArgs& args) const {
    return std::min(int64_t{request.num_computed_tokens} + args.num_new_computed_tokens,
                    int64_t{config_.max_model_len}) +
           args.num_new_tokens;
  }
  std::span<const BlockId> allocate_slots_fits(const Request& request,
                                               const AllocateSlotsArgs& args, RequestBlocks& st) {
    hold_tokens_in_table(request, st, main_tokens(request, args));
    new_blocks_.clear();
    return new_blocks_;
  }
  std::optional<std::span<const BlockId>> allocate_slots_general(Request& request,
                                                                 const AllocateSlotsArgs& args);
  // Whether the first num_tokens tokens fill a block past the ones already cached: a
  // multiplication instead of the division in cache_blocks_held().
  bool completes_a_cached_block(const RequestBlocks& st, int64_t num_tokens) const {
    return num_tokens >= (int64_t{std::max(st.num_cached_block, 0)} + 1) * config_.block_size;
  }
  // cache_blocks() of a live request (either path).
  void cache_blocks_held(const Request& request, RequestBlocks& st, int64_t num_tokens);
  int32_t get_num_blocks_to_allocate(const RequestBlocks& st, int64_t num_tokens,
                                     std::span<const BlockId> hits) const;
  void record_lookup(const Request& request, int32_t num_hit_tokens);
  std::optional<std::span<const BlockId>> allocate_slots_coordinated(Request& request,
                                                                     const AllocateSlotsArgs& args);
  void get_computed_blocks_coordinated(const Request& request, ComputedBlocks& out);
  int64_t coordinated_padding_tokens() const;
  void check_invariants_coordinated() const;

  KVCacheManagerConfig config_;
  BlockPool block_pool_;
  std::unique_ptr<KVCacheCoordinator> coordinator_;  // null: single full-attention path
  std::vector<int32_t> new_block_group_ends_;
  int32_t watermark_blocks_ = 0;
  std::vector<RequestBlocks> req_to_blocks_;
  // Tables of freed requests, kept for reuse: request ids are never reused, so without this every
  // admission would allocate a fresh table and every free would release one.
  std::vector<std::vector<BlockId>> spare_tables_;
  std::vector<BlockId> new_blocks_;
  PrefixCacheStats prefix_cache_stats_;
  int64_t total_table_blocks_ = 0;
  int64_t total_held_tokens_ = 0;
  int64_t num_live_requests_ = 0;
};

}  // namespace kvsim
