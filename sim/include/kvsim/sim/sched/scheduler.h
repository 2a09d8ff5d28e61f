// Scheduler: vLLM 0.26's v1 `Scheduler` (sync) and `AsyncScheduler` (async, vLLM's default)
// (vllm/v1/core/sched/scheduler.py, async_scheduler.py; spec docs §5.3-5.6), driving one
// KVCacheManager.
//
// One engine step is `schedule()` then, for that batch, `update_from_output()`:
//   * schedule(): the RUNNING loop (admission order, allocate-or-preempt), then - only if that
//     loop preempted nothing - the WAITING loop (prefix lookup, admission, head-of-line blocking),
//     then num_computed_tokens += n for every scheduled request (vLLM: _update_after_schedule).
//   * update_from_output(): every scheduled request that is not a prefill chunk samples exactly
//     one token (EOS ignored); it stops at max_tokens or max_model_len and its blocks are freed
//     at once.
// Sync (SchedulerConfig::async_scheduling = false): schedule() and update_from_output() strictly
// alternate (vLLM EngineCore.step).
// Async (true; vLLM AsyncScheduler under EngineCore.step_with_batch_queue, max_concurrent_batches
// = 2): schedule() may run while one earlier batch is pending, and update_from_output() applies
// the OLDEST pending batch. A scheduled request that is not a prefill chunk gets one output
// placeholder (Request::num_output_placeholders), so the next schedule() already schedules its
// next decode at the position of the token still in flight (its slot is allocated one position
// earlier than in sync mode); a request whose in-flight tokens already reach max_tokens is
// skipped. When the token arrives, the placeholder is removed and the request's newly full
// blocks are cached (cache_blocks(num_computed - placeholders)). A request finishing in batch k
// is freed by update(k), i.e. after schedule(k+1). A request preempted while its token is in
// flight still receives that token (and may finish while waiting). EngineCore (engine_core.h)
// reproduces the batch-queue call order.
// Not cloned: speculative decoding, KV connectors, encoder budgets, LoRA, structured output,
// pipeline parallelism (see docs/scheduler.md).
// Hybrid KV layouts (SchedulerConfig::kv_cache_config with several groups, or one window group)
// run through KVCacheManager's coordinator: one pool, per-group tables; each step's
// allocate_slots first frees the blocks that fell out of a request's window (processed tokens
// only: Request::num_in_flight_tokens tracks the tokens of batches not yet applied).
//
// Ownership: the scheduler stores non-owning Request pointers; the caller keeps every Request
// alive (and at a stable address) until it is finished. Request ids must be dense and unique.
// Invariants between steps: running and waiting are disjoint; every running request has
// status RUNNING, every waiting one WAITING or PREEMPTED; len(running) <= max_num_seqs; at most
// 1 (sync) or 2 (async) outputs are pending; a waiting request has no placeholders when
// schedule() starts (its in-flight token was applied by the update between).
//
// Swap preemption (PreemptionMode::SWAP, kvsim's extension beyond vLLM 0.26, modelled on vLLM
// V0's swap; sync scheduling only: V0 never had async scheduling and vLLM v1 has no swap): a
// victim whose computed KV fits in the free host slots keeps num_computed_tokens
// C; its first cdiv(C, bs) blocks are listed in SchedulerOutput::swap_out (device block -> host
// slot, executed before the step's writes), then freed as in recompute mode. On re-admission it
// skips the prefix lookup, allocate_slots() gives it a whole new table, and swap_in lists host
// slot -> new block for those cdiv(C, bs) blocks; the host slots are released at once. A victim
// that does not fit the free host slots is recomputed (num_swap_fallbacks). Invariants: a
// request holds host slots iff it is waiting with num_computed_tokens > 0; host slots held +
// free == num_host_swap_slots.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/request.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/sim/sched/request_queue.h"

namespace kvsim {

// What a preempted request loses: RECOMPUTE (vLLM v1, the only mode of vLLM 0.26) drops its KV;
// SWAP copies it to host swap slots and back on resume (vLLM V0's swap, see above).
enum class PreemptionMode : uint8_t { RECOMPUTE, SWAP };
std::string_view to_string(PreemptionMode m);

// vLLM SchedulerConfig/CacheConfig knobs that matter to the scheduler and its KV manager.
struct SchedulerConfig {
  int32_t max_num_batched_tokens = 8192;  // token budget per step (max_num_scheduled_tokens)
  int32_t max_num_seqs = 256;
  int32_t long_prefill_token_threshold = 0;  // 0 = disabled
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::FCFS;
  double watermark = 0.0;                  // [0, 1)
  bool scheduler_reserve_full_isl = true;  // full-sequence admission gate
  int32_t num_lookahead_tokens = 0;
  int32_t max_model_len = 0;  // L
  int32_t block_size = 16;
  int32_t num_gpu_blocks = 0;  // N, null block included
  PreemptionMode preemption_mode = PreemptionMode::RECOMPUTE;
  int64_t num_host_swap_slots = 0;  // SWAP: host blocks (one device block each); >= 0
  // vLLM's AsyncScheduler + batch queue of 2 (see above). The struct default is the plain
  // Scheduler; make_replay_config() and the CLI default to true, as `vllm serve` does.
  bool async_scheduling = false;
  // The KV layout (the planner's Plan::kv_cache_config). Empty kv_cache_groups: one
  // full-attention group of num_gpu_blocks blocks of block_size tokens. Otherwise num_blocks and
  // the block size must equal num_gpu_blocks and block_size; SWAP needs a single full group.
  KVCacheConfig kv_cache_config = {};
  // Speed only, never behaviour: salted (request-private) block hashes stay out of the prefix
  // map until their request is preempted (KVCacheManagerConfig::defer_private_block_hashes).
  // Every block id, counter and lookup is the same either way (tests/sim/
  // test_private_block_hashes.cpp replays both); false restores vLLM's eager map.
  bool defer_private_block_hashes = true;
};

// Batches that may be scheduled and not yet processed: vLLM's max_concurrent_batches
// (2 with async scheduling and no pipeline parallelism, else 1).
inline int32_t max_concurrent_batches(const SchedulerConfig& c) {
  return c.async_scheduling ? 2 : 1;
}

// Throws std::invalid_argument naming the first bad field (and for SWAP with async scheduling).
void validate(const SchedulerConfig& config);

// Why a request was rejected (FINISHED_ABORTED) instead of served. Counted by the replay.
enum class RejectReason : uint8_t {
  EMPTY_PROMPT,         // at arrival: 0 prompt tokens
  PROMPT_TOO_LONG,      // at arrival: prompt >= max_model_len
  PROMPT_EXCEEDS_POOL,  // at arrival: the prompt needs more than N-1 blocks
  NEVER_ADMITTABLE,     // run time: head of waiting cannot be admitted into an empty engine
  OUTGREW_POOL,         // run time (gate off): a preempted request needs more than N-1 blocks
};
inline constexpr int kNumRejectReasons = 5;
std::string_view to_string(RejectReason r);

// Why the WAITING loop stopped admitting this step (which limit was binding).
enum class AdmissionStop : uint8_t {
  QUEUE_EMPTY,   // nothing (more) waiting
  TOKEN_BUDGET,  // budget exhausted, or (chunked prefill off) the next prompt exceeds it
  MAX_NUM_SEQS,  // len(running) >= max_num_seqs
  KV_CACHE,      // allocate_slots returned None (head-of-line blocking)
  PREEMPTED,     // the RUNNING loop preempted: no admission this step
};

// One request scheduled in a step (vLLM: num_scheduled_tokens[req] + new block ids).
struct ScheduledRequest {
  int64_t request_id = 0;
  int32_t num_tokens = 0;             // tokens scheduled this step (n)
  int32_t num_computed_tokens = 0;    // computed before this step = first position written
  int32_t num_prefix_hit_tokens = 0;  // prefix-cache hit at admission (0 for running requests)
  int32_t new_blocks_begin = 0;       // newly allocated ids: SchedulerOutput::new_block_ids
  int32_t new_blocks_count = 0;       //   [begin, begin + count)
  // Hybrid layouts: the new ids above are all groups' in group order; group g's end (relative
  // to new_blocks_begin) is SchedulerOutput::new_block_group_ends[group_ends_begin + g].
  // -1 on the single full-attention path.
  int32_t group_ends_begin = -1;
  bool is_decode = false;      // generating the next token from the cache (n == 1, C == T - 1)
  bool is_new = false;         // admitted from WAITING this step
  bool is_resumed = false;     // admitted from PREEMPTED this step
  bool is_swapped_in = false;  // resumed with its KV swapped back in from host (SWAP mode)
  // Set by schedule() (vLLM: request.is_prefill_chunk): computed tokens after this step stay
  // below tokens + placeholders, so the step samples nothing for it.
  bool is_prefill_chunk = false;
  // Async: placeholders it had when scheduled (> 0: scheduled one token ahead, at the position
  // of a token still in flight). Always 0 in sync mode.
  int32_t num_output_placeholders = 0;
  int32_t num_freed_blocks = 0;  // set by update_from_output: blocks freed when it finished
  bool sampled = false;          // set by update_from_output: received a token
  bool finished = false;         // set by update_from_output: stopped and freed
};

// What one schedule() decided. The scheduler keeps a ring of max_concurrent_batches() of them,
// reused across steps (vectors keep their capacity).
struct SchedulerOutput {
  int64_t step_index = 0;
  std::vector<ScheduledRequest> scheduled;    // RUNNING-loop requests first, then admissions
  std::vector<BlockId> new_block_ids;         // may hold orphans of requests preempted later
  std::vector<int32_t> new_block_group_ends;  // hybrid only, see ScheduledRequest
  std::vector<int64_t> preempted_req_ids;     // in preemption order
  std::vector<int64_t> finished_req_ids;      // freed by the previous update_from_output
  std::vector<int64_t> aborted_req_ids;       // rejected at run time during this step
  // SWAP mode. Executed before the step's copies and writes: swap_out first, then swap_in.
  std::vector<BlockSwap> swap_out;           // victims' blocks, in preemption then table order
  std::vector<BlockSwap> swap_in;            // resumed requests' blocks, in table order
  std::vector<int64_t> swapped_out_req_ids;  // victims whose KV went to host (subset of
                                             // preempted_req_ids)
  std::vector<int64_t> swapped_in_req_ids;   // re-admitted from host this step
  int32_t num_swap_fallbacks = 0;            // SWAP victims recomputed: host slots ran out
  int64_t total_num_scheduled_tokens = 0;
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  AdmissionStop admission_stop = AdmissionStop::QUEUE_EMPTY;

  void clear();
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  const SchedulerConfig& config() const { return config_; }
  KVCacheManager& kv_cache_manager() { return kv_; }
  const KVCacheManager& kv_cache_manager() const { return kv_; }

  // The arrival-time rejection rule (replay conventions §6): returns false and sets *reason
  // when the request can never be served. A prompt "needs" cdiv(min(prompt + lookahead, L), bs)
  // blocks: its last prefill chunk must hold all of them at once.
  bool check_new_request(const Request& r, RejectReason* reason) const;

  // Queues a request (vLLM: add_request). Enables block hashing when prefix caching is on.
  // Throws std::invalid_argument for an id already used or a request not WAITING.
  void add_request(Request* r);

  // Decides one step. The returned reference stays valid until max_concurrent_batches() more
  // schedule() calls. Throws std::logic_error when max_concurrent_batches() outputs are already
  // pending (sync: schedule twice without update_from_output).
  const SchedulerOutput& schedule();

  // Applies the OLDEST pending output's sampled tokens (one per scheduled request that is not a
  // prefill chunk and not finished meanwhile), finishes and frees stopped requests, and returns
  // that output with `sampled`/`finished` set. Throws std::logic_error when nothing is pending.
  const SchedulerOutput& update_from_output();

  // vLLM has_requests(): requests waiting or running, or finished ones not yet reported in a
  // SchedulerOutput::finished_req_ids.
  bool has_requests() const { return has_unfinished_requests() || !finished_pending_.empty(); }
  // Outputs scheduled and not yet passed to update_from_output().
  int64_t num_pending_outputs() const { return step_ - first_pending_step_; }
  // schedule() calls so far (the next step index).
  int64_t num_scheduled_steps() const { return step_; }
  // Whether the id of a request that was done (finished, aborted or rejected; its KV freed) when
  // num_scheduled_steps() was `done_at` may be given to a new request: every output scheduled by
  // then has been updated (an async batch in flight may still name it) and a later schedule()
  // has reported it in finished_req_ids. Streaming replays reuse ids (Request::request_id).
  bool id_reusable(int64_t done_at) const {
    return first_pending_step_ >= done_at && step_ > done_at;
  }

  // Aborts the head of the waiting queue (vLLM: finish_requests with FINISHED_ABORTED).
  // Returns it. Precondition: waiting is not empty.
  Request* abort_waiting_head();

  std::span<Request* const> running() const { return running_; }
  const RequestQueue& waiting() const { return waiting_; }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }

  // SWAP mode: host slots not held by any swapped-out request, and the slots one request holds
  // (in block order; empty unless it is waiting with its KV on host).
  int64_t num_free_host_slots() const { return static_cast<int64_t>(free_host_slots_.size()); }
  int64_t num_used_host_slots() const {
    return config_.num_host_swap_slots - num_free_host_slots();
  }
  std::span<const int64_t> host_slots(int64_t request_id) const;

  // ---- Steady decoding: O(events) engine steps (speed only, never behaviour) ----
  // Most async steps of a loaded replay only decode: every running request gets one token,
  // nothing waits, and a request touches the pool once per block_size steps (a new block, a
  // hash and a cached block) and once more when it finishes. In steady-decode mode one engine
  // step (schedule batch s, then update batch s-1) does the exact per-request work of
  // schedule_running() / update_from_output() only for the requests that have such an *event*
  // this step, in running order, and advances everybody else with O(1) aggregate counters.
  //
  // Lazy state: a running request's num_computed_tokens, num_output_tokens and its table's
  // held_tokens lag by (steps done - its base step); everything else (the pool, the tables, the
  // block hashes, the totals behind padding_tokens() and usage(), step indices, finished lists)
  // is exact after every call. Each request's next event step is predicted conservatively from
  // its exact state (docs/engine-speed.md §Steady decoding); a request is settled (made exact)
  // before its event and whenever the mode ends, so an early event is harmless and none can be
  // missed: settling throws std::logic_error if a block-hash boundary was skipped.
  //
  // Contract: begin_steady_decode() succeeds only between engine steps of an async FCFS
  // recompute scheduler on the single full-attention path, no lookahead, nothing waiting, and
  // exactly one batch pending that decoded every running request by one token (each RUNNING
  // with num_computed == num_tokens, one placeholder, one token in flight, one output token at
  // least). Then each step is steady_schedule() followed by steady_update(); steady_schedule()
  // returns false and changes nothing observable when the step needs the general path (an
  // allocation that could fail, so a preemption; nothing to schedule). end_steady_decode()
  // settles every request and rebuilds the pending batch's SchedulerOutput as schedule() would
  // have built it, so update_from_output() and every accessor work as before. While the mode is
  // on, only the accessors running(), num_running(), num_waiting(), has_requests(),
  // num_pending_outputs(), num_scheduled_steps(), id_reusable() and kv_cache_manager()'s pool
  // and totals may be read; Request counters of running requests and per-request tables may not.
  struct SteadyBatch {
    int64_t step_index = 0;          // batch s
    int32_t num_scheduled = 0;       // decodes in batch s, one token each
    int64_t sum_context_tokens = 0;  // Σ num_computed_tokens before the step over batch s
    int32_t num_new_blocks = 0;      // blocks allocated for batch s
    struct Finished {
      int64_t request_id = 0;
      int32_t num_freed_blocks = 0;
    };
    std::vector<Finished> finished;  // stopped and freed by the update half, in update order
  };
  bool begin_steady_decode();
  bool in_steady_decode() const { return steady_active_; }
  // The schedule half of step s; on success the returned output holds batch s's totals, new
  // block ids and finished_req_ids but not its per-request entries (rebuilt on end).
  const SchedulerOutput* steady_schedule(SteadyBatch& batch);
  // The update half: applies batch s-1 and fills batch.finished.
  void steady_update(SteadyBatch& batch);
  void end_steady_decode();

 private:
  // Blocks a sequence of `tokens` tokens (lookahead included by the caller) holds at once:
  // cdiv(min(tokens, max_model_len), block_size).
  int64_t blocks_needed(int64_t tokens) const;
  bool schedule_running(int64_t& token_budget);
  void schedule_waiting(int64_t& token_budget);
  void preempt(Request* victim);
  bool try_swap_out(Request& victim);
  void swap_in(Request& r, std::span<const BlockId> new_blocks);
  void release_host_slots(Request& r);
  void unschedule(size_t scheduled_index, int64_t& token_budget);
  ScheduledRequest& add_scheduled(Request& r, int32_t n, std::span<const BlockId> new_blocks);

  SchedulerConfig config_;
  KVCacheManager kv_;
  RequestQueue waiting_;
  std::vector<Request*> running_;
  std::vector<Request*> by_id_;  // request id -> request (nullptr once finished)
  // PRIORITY policy only (FCFS never reads it): request id -> index in output_.scheduled, or -1.
  std::vector<int32_t> scheduled_index_;
  std::vector<int64_t> finished_pending_;  // freed by update_from_output, reported next step
  std::vector<int64_t> free_host_slots_;   // stack: back() is handed out next
  std::vector<std::vector<int64_t>> host_slots_of_;  // request id -> host slots held
  std::array<SchedulerOutput, 2> outputs_;           // ring indexed by step_index % 2
  SchedulerOutput* output_ = &outputs_[0];           // the one schedule() is filling
  ComputedBlocks computed_blocks_scratch_;  // schedule_waiting's prefix lookup (capacity reused)
  int64_t step_ = 0;                        // next step index
  int64_t first_pending_step_ = 0;          // oldest output not yet updated
  // Steady decoding (see above). steady_base_ / steady_next_event_ are parallel to running_.
  bool steady_active_ = false;
  bool steady_rebuild_pending_ = false;     // the pending output was filled by steady_schedule()
  int64_t steady_steps_ = 0;                // steps done in the mode (the lazy clock)
  int64_t steady_sum_computed_ = 0;         // Σ num_computed_tokens over running (exact values)
  std::vector<int64_t> steady_base_;        // steps done when the request was last exact
  std::vector<int64_t> steady_next_event_;  // step of its next event (>= steady_steps_)
  std::vector<int32_t> steady_events_;      // this step's event requests (running indices)
  struct SteadyAlloc {
    int64_t request_id = 0;
    int32_t count = 0;
  };
  std::vector<SteadyAlloc> steady_allocs_;  // batch s's allocations, in running order
  void steady_settle(size_t running_index);
  int64_t steady_next_event(const Request& r) const;
  bool steady_skips(const Request& r) const;
};

}  // namespace kvsim
