// Request: the per-request state the allocator and scheduler read (vLLM: vllm/v1/request.py).
//
// kvsim never materialises generated token ids: a request is its prompt description, how many
// tokens it holds, and the chained hashes of its full blocks. Generated tokens are unique to their
// request (generation is not shared), so their blocks hash with the request's salt.
//
// Invariants:
//   * 0 <= num_computed_tokens <= num_tokens() + num_output_placeholders (between steps; during a
//     step the scheduler may have scheduled tokens beyond num_tokens() only for the sampled token
//     of a finished prefill; in async mode a decode is scheduled at the position of its
//     still-unsampled token).
//   * num_block_hashes() == block_hashes.size() + num_deferred_block_hashes ==
//     num_tokens() / hash_block_size when hashing is enabled, else 0;
//     next_block_hash_tokens == (num_block_hashes() + 1) * hash_block_size when enabled.
//   * num_deferred_block_hashes > 0 only with defer_private_block_hashes, and then every
//     deferred block is private (index >= first_private_block_hash).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvsim/core/types.h"

namespace kvsim {

enum class RequestStatus : uint8_t {
  WAITING,
  RUNNING,
  PREEMPTED,
  FINISHED_LENGTH_CAPPED,  // max_tokens or max_model_len reached
  FINISHED_ABORTED,        // rejected: can never be admitted
};

inline bool is_finished(RequestStatus s) {
  return s == RequestStatus::FINISHED_LENGTH_CAPPED || s == RequestStatus::FINISHED_ABORTED;
}

// What the prompt is made of, for prefix-cache hashing. Exactly one description applies:
// token ids if present, else external hash ids if present, else unique content.
struct PromptContent {
  std::shared_ptr<const std::vector<int32_t>> token_ids;  // full prompt, optional
  std::shared_ptr<const std::vector<uint64_t>> hash_ids;  // one per hash_ids_block_size tokens
  int32_t hash_ids_block_size = 0;
  uint64_t salt = 0;  // request-unique; used for generated tokens and content-free prompts
};

struct Request {
  // Dense, 0-based: the slot KVCacheManager and the scheduler index their tables by. A streaming
  // replay reuses the slot of a request that is done, so it names a request only while it is in
  // flight; external_id names it for the whole run.
  int64_t request_id = 0;
  int32_t num_prompt_tokens = 0;
  int32_t max_tokens = 1;
  int32_t num_output_tokens = 0;
  int32_t num_computed_tokens = 0;
  int32_t priority = 0;  // lower is served first (vLLM priority policy)
  int64_t arrival_time_ns = 0;
  RequestStatus status = RequestStatus::WAITING;
  int32_t num_preemptions = 0;
  // vLLM Request.shared_prefix_boundary: the shared-prefix junction its last prefix lookup found
  // (ComputedBlocks::shared_prefix_boundary; 0: none). Sparse sliding-window retention keeps the
  // window tail before it cached (KVCacheManagerConfig::prefix_cache_retention_interval).
  int32_t shared_prefix_boundary = 0;
  // Async scheduling (vLLM: Request.num_output_placeholders): tokens scheduled for sampling whose
  // batch is still in flight, so not yet appended. Counted by schedule() for every scheduled
  // request that is not a prefill chunk, uncounted when update_from_output() appends the token.
  // Always 0 in sync mode; between steps 0 <= placeholders <= 2 (max_concurrent_batches).
  int32_t num_output_placeholders = 0;
  // Tokens scheduled in batches whose output is not processed yet (vLLM:
  // Request.num_in_flight_tokens): + n when a step schedules n tokens for it, - n when that step's
  // output is applied. Sync mode: 0 between steps. Window groups free out-of-window blocks only
  // below num_computed_tokens - num_in_flight_tokens (in-flight steps still read the rest).
  int32_t num_in_flight_tokens = 0;
  int32_t hash_block_size = 0;  // 0: hashing disabled (prefix caching off)
  // num_tokens() at which the first block not in block_hashes is full: (len + 1) *
  // hash_block_size, kept by update_block_hashes(); INT32_MAX while hashing is disabled. The
  // fields above fit one cache line, so a decode step's checks never touch the ones below.
  // Code that edits block_hashes directly must call update_block_hashes() before appending.
  int32_t next_block_hash_tokens = INT32_MAX;
  PromptContent content;

  // Chained hashes of the full blocks of hash_block_size tokens (vLLM: Request.block_hashes).
  std::vector<BlockHash> block_hashes;
  // Index of the first block hash salted with this request's salt (a block of generated tokens,
  // or of a prompt without content); every hash from there on is salted too. INT32_MAX while
  // none is. Salts are request-unique (request_id + 1), so only this request can ever look such
  // a hash up: KVCacheManager keeps those blocks out of the prefix map until the request is
  // preempted (BlockPool's private blocks), which no lookup can tell apart from vLLM's eager
  // caching. Kept by update_block_hashes().
  int32_t first_private_block_hash = INT32_MAX;
  // Private hashes not computed yet (only with defer_private_block_hashes): the hashes of blocks
  // block_hashes.size() .. num_block_hashes() - 1, all salted. Nothing can look them up before
  // the request is preempted (KVCacheManager keeps private blocks out of the prefix map until
  // then), so they are computed only when needed: materialize_block_hashes() (the scheduler
  // calls it before a preemption publishes them, and before a preempted request's lookup).
  int32_t num_deferred_block_hashes = 0;
  bool defer_private_block_hashes = false;
  // The request's run-wide identity (a replay: its trace index), unique over the run; -1 means
  // request_id is (no slot is ever reused). The priority queue breaks ties on it, so that
  // reusing slots cannot reorder requests of equal priority and arrival (vLLM compares request
  // ids, which are never reused).
  int64_t external_id = -1;

  int32_t num_tokens() const { return num_prompt_tokens + num_output_tokens; }
  // Full blocks hashed (computed or deferred).
  int32_t num_block_hashes() const {
    return static_cast<int32_t>(block_hashes.size()) + num_deferred_block_hashes;
  }
  int64_t id_for_ordering() const { return external_id >= 0 ? external_id : request_id; }

  // Enables hashing with the given block size and hashes the prompt's full blocks; with
  // `defer_private`, private hashes are deferred (num_deferred_block_hashes).
  void enable_block_hashing(int32_t block_size, bool defer_private = false);
  // Computes every deferred hash (block_hashes then holds all num_block_hashes()).
  void materialize_block_hashes();
  // Appends n generated tokens and hashes any blocks they complete
  // (vLLM: append_output_token_ids -> update_block_hashes). Inline: every decode step of every
  // request calls it, and only one in hash_block_size calls completes a block.
  void append_output_tokens(int32_t n) {
    num_output_tokens += n;
    if (num_tokens() >= next_block_hash_tokens) update_block_hashes();
  }
  // Hashes (or defers) every full block not hashed yet (from num_block_hashes() on) and sets
  // next_block_hash_tokens. Inline for the common call once hashes are deferred: the next block
  // reaches past the prompt, so it and every later one is private and only counted (what the
  // general loop's first iteration does).
  void update_block_hashes() {
    if (num_deferred_block_hashes > 0 && hash_block_size > 0) {
      const int64_t bs = hash_block_size;
      const int64_t next = num_block_hashes();
      if ((next + 1) * bs > num_prompt_tokens) {
        const int64_t full = num_tokens() / bs;
        if (full > next) num_deferred_block_hashes += static_cast<int32_t>(full - next);
        next_block_hash_tokens = static_cast<int32_t>(
            std::min<int64_t>((int64_t{num_block_hashes()} + 1) * bs, INT32_MAX));
        return;
      }
    }
    update_block_hashes_general();
  }
  void update_block_hashes_general();
  // Frees the hash list's memory once the request is finished or rejected (its hashes are never
  // read again). `block_hashes = {}` would not: that is the initializer-list assignment, which
  // keeps the capacity, so every finished request kept its list until the replay ended.
  void release_block_hashes() {
    std::vector<BlockHash>().swap(block_hashes);
    num_deferred_block_hashes = 0;
  }
};

}  // namespace kvsim
