// Scheduler: vLLM 0.26's v1 `Scheduler` (sync) and `AsyncScheduler` (async, vLLM's default)
// (vllm/v1/core/sched/scheduler.py Scheduler.schedule / update_from_output, async_scheduler.py
// AsyncScheduler, vllm/v1/engine/core.py EngineCore.step_with_batch_queue), driving one
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

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kvsim/core/kv_cache_manager.h"
#include "kvsim/core/kv_cache_spec.h"
#include "kvsim/core/request.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/core/vllm_version.h"
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
  int32_t block_size = kDefaultBlockSize;
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
  // engine/test_private_block_hashes.cpp replays both); false restores vLLM's eager map.
  bool defer_private_block_hashes = true;
  // Speed only, never behaviour: steady decodes are scheduled and updated lazily (see
  // Scheduler::lazy_decodes_active). Off by default: outputs then list every scheduled request;
  // the replay engine turns it on for null-backend replays (ReplayConfig::steady_decode).
  bool lazy_steady_decodes = false;
  // Speed only, for sync lazy steady decodes: a member's completed private blocks are marked
  // cached when it is next settled (or by its next new-block event), not by the schedule whose
  // allocation completed them, so a block costs one event (its new block) instead of two. Until
  // then the pool's cached count (BlockPool::num_cached_blocks) lags by those marks
  // (Scheduler::lazy_pending_cache_marks says by how many); nothing else can tell (the blocks are
  // private: no lookup finds them, and everything that frees, preempts or publishes them settles
  // first). Off by default; the replay engine turns it on with lazy steady decodes.
  bool lazy_cache_marks = false;
  // Speed only: whether lazy_pending_cache_marks() is asked every step (a timeline is recorded):
  // the marks are then counted by batch as members change (O(1) a row); otherwise each call
  // passes over the members and nothing is counted.
  bool count_pending_cache_marks = true;
  // The cloned release's behaviour (core/vllm_version.h): the struct default is 0.26's;
  // make_replay_config() sets the release the user chose.
  VllmBehavior behavior = {};
  // vLLM 0.33 --max-num-active-seqs: the WAITING loop admits while len(running) < this
  // (0 = max_num_seqs); <= max_num_seqs. Needs behavior.has_max_num_active_seqs.
  int32_t max_num_active_seqs = 0;
  // vLLM 0.33 --long-prefill-token-threshold-adaptive: a threshold > 0 is raised to at least
  // max_num_batched_tokens / (running + waiting) each step. Needs the release to have it.
  bool long_prefill_token_threshold_adaptive = false;
  // Sliding-window prefix-cache retention (KVCacheManagerConfig::prefix_cache_retention_interval;
  // -1 dense, 0 sparse, N > 0). Unset: the release's default
  // (behavior.default_prefix_cache_retention_interval).
  std::optional<int32_t> prefix_cache_retention_interval;
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
  int64_t order_key = 0;         // lazy steady decodes: the request's running-order key
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
  // Lazy steady decodes (Scheduler::lazy_decodes_active): decodes of one token each scheduled
  // without an entry in `scheduled`, and Σ of their num_computed_tokens before the step. They
  // are counted in the totals above; each was scheduled with one placeholder.
  int32_t implicit_decodes = 0;
  int64_t implicit_context_tokens = 0;
  int32_t implicit_new_blocks = 0;  // of new_block_ids, allocated for implicit decodes
  // Set by update_from_output: every request it stopped and freed, in processing order (the
  // batch's order), with the blocks it freed - entries and implicit decodes alike.
  struct Finished {
    int64_t request_id = 0;
    int32_t num_freed_blocks = 0;
  };
  std::vector<Finished> finished_in_update;

  void clear();
};

// The slot of step (batch) index `step` >= 0 in a ring of two (Scheduler's outputs, the async
// engine's batch end times): its parity, without signed modulo's fix-ups for negative values.
inline size_t batch_slot(int64_t step) {
  return static_cast<size_t>(static_cast<uint64_t>(step) & 1);
}

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  const SchedulerConfig& config() const { return config_; }
  KVCacheManager& kv_cache_manager() { return kv_; }
  const KVCacheManager& kv_cache_manager() const { return kv_; }

  // The arrival-time rejection rule (docs/scheduler.md §Rejections): returns false and sets
  // *reason when the request can never be served. A prompt "needs"
  // cdiv(min(prompt + lookahead, L), bs) blocks: its last prefill chunk must hold all of them at
  // once.
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

  // The scheduler's half of one *quiet* engine step: every running request a lazy member
  // (lazy_decodes_active) whose event in it, if any, stays one decode (a new or cached block
  // that the pool can serve), nothing waiting (finished ids left to report are reported as
  // schedule() would), and, async, the
  // one pending batch holding implicit decodes only. schedule() and the update_from_output()
  // that engine step makes (async: of the pending batch; sync: of the batch just scheduled) then
  // only move the lazy clocks and totals and serve those events: this does exactly what the two
  // calls would do and returns the outputs the two would have returned. Returns nulls, having
  // changed nothing, when the step is not quiet; the caller then makes the two calls.
  struct QuietStep {
    const SchedulerOutput* scheduled = nullptr;
    const SchedulerOutput* updated = nullptr;
  };
  QuietStep schedule_and_update_if_quiet();
  // The same, as a run of quiet steps back to back: quiet_run_possible() checks the conditions
  // above that a quiet step leaves as they were (all but the events); while nothing else is
  // called, each quiet_run_step() is then schedule_and_update_if_quiet() with only its events
  // checked: the output scheduled (the update's is the batch before, async, or the same, sync),
  // or nullptr, having changed nothing, when the step is not quiet.
  bool quiet_run_possible(bool finishes = false) const;
  // With finishes, a member's stop no longer ends the run. Sync: a member whose decode in this
  // step is its last (its update stops it at max_tokens or max_model_len), when that decode
  // fits its blocks: the step schedules it as schedule() would (it departs, its one token held
  // in its table) and leaves the update's part for it, which frees its blocks, to
  // quiet_run_finish(); the caller records the step's state (what the engine reads between
  // schedule() and update_from_output()) and then, when quiet_step_finishers() > 0, must call
  // quiet_run_finish() before anything else. Async: a member whose last token (max_tokens) is
  // in the pending batch: the step skips it as the RUNNING loop does and the pending batch's
  // update finishes it inside this call (unless every running request is one: no token). Also
  // async, a run's first step may update a batch with entries or departed members (see
  // quiet_run_possible(true)): that update is update_from_output() itself, inside this call.
  // Either way the finished requests (and the entries sampled) are in quiet_step_update().
  const SchedulerOutput* quiet_run_step(bool finishes = false);
  // The same, inline (kvsim/sim/sched/detail/scheduler_quiet_step.h): ReplicaEngine's run of
  // quiet steps.
  const SchedulerOutput* quiet_run_step_inline(bool finishes);
  // Members the last quiet_run_step(true) scheduled for their last token (sync).
  size_t quiet_step_finishers() const { return lz_quiet_finishers_.size(); }
  // The output the last quiet step's update applied (sync: its own; async: the batch before).
  const SchedulerOutput& quiet_step_update() const {
    return outputs_[batch_slot(first_pending_step_ - 1)];
  }
  // update_from_output()'s part for them: each samples its last token and finishes (its blocks
  // freed, listed in the output's finished_in_update and reported by the next schedule), in
  // running order; running_ is compacted. A quiet run may go on after it while requests run.
  void quiet_run_finish();
  // Part of the conditions above, inline: false means the next step is not quiet.
  bool quiet_step_possible() const {
    return lazy_ && static_cast<size_t>(lz_num_members_) == running_.size() && waiting_.empty();
  }
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
  bool has_waiting() const { return !waiting_.empty(); }  // num_waiting() > 0, cheaper
  bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }

  // SWAP mode: host slots not held by any swapped-out request, and the slots one request holds
  // (in block order; empty unless it is waiting with its KV on host).
  int64_t num_free_host_slots() const { return static_cast<int64_t>(free_host_slots_.size()); }
  int64_t num_used_host_slots() const {
    return config_.num_host_swap_slots - num_free_host_slots();
  }
  std::span<const int64_t> host_slots(int64_t request_id) const;

  // ---- Lazy steady decodes: O(events) steps (SchedulerConfig::lazy_steady_decodes) ----
  // Most of an async replay's scheduled requests are steady decodes: one token per step, and a
  // pool operation only once per block_size steps (a new block, a cached block, a hashed block)
  // and at the end. With lazy_steady_decodes such a request is a *steady member*: schedule()
  // counts it into the batch without an entry (SchedulerOutput::implicit_decodes) and
  // update_from_output() applies its token without touching it, through two lazy clocks
  // (schedules and updates completed since it was last exact). A member runs the general code
  // again - in its exact place in running order, settled (made exact) first - at its next
  // *event*, predicted conservatively from its exact state: its allocation or cached block, its
  // last token or max_model_len, and whenever the general code must see it (a token budget that
  // runs out before it, a preemption). A new or cached block keeps it a member; the other
  // events make it leave, and it joins again at the end of the update that finds it steady
  // (async: one token in flight, num_computed == num_tokens; sync: nothing in flight,
  // num_computed == num_tokens - 1). Block hashes are brought up to date whenever
  // it is settled. An early event costs time, never exactness.
  // Between calls the pool, the tables, block hashes, totals (padding_tokens(), usage()) and
  // step counters are exact; a member's Request counters and its table's held tokens lag until
  // settle_lazy_decodes(). Tokens scheduled implicitly are reported per request through
  // take_unreported_tokens() (the engine's per-request records).
  // Only for FCFS scheduling (async or sync; recompute or swap preemption: a victim departs,
  // settled, before it is swapped out) on the single full-attention path
  // without lookahead; otherwise the option does nothing.
  bool lazy_decodes_active() const { return lazy_; }
  // Makes every member's counters exact (members stay members).
  void settle_lazy_decodes();
  // Implicitly scheduled tokens of a request not yet taken, and the end position of the last
  // one; taking resets the count. Every such token is at a new position (never recomputed).
  struct UnreportedTokens {
    int32_t tokens = 0;
    int32_t end = 0;
  };
  UnreportedTokens take_unreported_tokens(int64_t request_id) {
    if (!lazy_ || request_id < 0 || static_cast<size_t>(request_id) >= lz_unreported_.size())
      return {};
    UnreportedTokens u = lz_unreported_[static_cast<size_t>(request_id)];
    lz_unreported_[static_cast<size_t>(request_id)].tokens = 0;
    return u;
  }
  int64_t num_lazy_members() const { return lz_num_members_; }
  // Cache marks pending after schedule(batch) (SchedulerConfig::lazy_cache_marks): the members
  // whose last block that schedule completed, not marked yet. BlockPool::num_cached_blocks()
  // plus this is the count without the option. O(1): the members' marks are counted by batch
  // as they are predicted, settled and departed (lz_marks_). (Inline: a timeline row asks it
  // every step.)
  int64_t lazy_pending_cache_marks(int64_t batch) const {
    if (!lz_cache_marks_) return 0;
    if (!lz_count_marks_ || lz_marks_overflow_) [[unlikely]] {
      return lazy_count_pending_cache_marks(batch);
    }
    const MarkSlot& s =
        lz_marks_[static_cast<size_t>(static_cast<uint64_t>(batch) & lz_marks_mask_)];
    return s.batch == batch ? s.count : 0;
  }
  // True when no member's next event is below the bound schedule() and update_from_output() use
  // to skip their scans over running (the invariant at lz_update_bound_; for tests).
  bool lazy_event_bound_holds() const {
    return std::all_of(lz_next_update_.begin(), lz_next_update_.end(),
                       [this](int64_t u) { return u >= lz_update_bound_; });
  }
  // Tests: the quiet runs' agenda lists every member exactly once, under the step of its next
  // schedule event (never before the next schedule), non-members nowhere, its links agree both
  // ways, and its mask marks exactly the non-empty steps.
  bool lazy_agenda_holds() const;
  // Tests: lz_marks_ counts exactly the members whose mark is counted (mark_counted), by batch,
  // every row's count is the pass over the members', and no two batches met in one slot.
  bool lazy_marks_hold() const;
  // Settles every member and hands each request's unreported tokens to f(request_id, tokens)
  // (a replay that stops with requests still in flight).
  template <class F>
  void drain_unreported_tokens(F&& f) {
    if (!lazy_) return;
    settle_lazy_decodes();
    for (size_t id = 0; id < lz_unreported_.size(); ++id) {
      if (lz_unreported_[id].tokens == 0) continue;
      f(static_cast<int64_t>(id), lz_unreported_[id]);
      lz_unreported_[id].tokens = 0;
    }
  }

 private:
  // Blocks a sequence of `tokens` tokens (lookahead included by the caller) holds at once:
  // cdiv(min(tokens, max_model_len), block_size).
  int64_t blocks_needed(int64_t tokens) const;
  // The long-prefill threshold this step's loops use (VllmBehavior::
  // lone_request_ignores_threshold, long_prefill_token_threshold_adaptive).
  int64_t long_prefill_threshold_for_step() const;
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
  int64_t step_threshold_ = 0;              // long_prefill_threshold_for_step() of this step
  // Lazy steady decodes (see above). lz_next_sched_ and lz_ are parallel to running_.
  struct LazyRunning {
    int64_t key = 0;  // running order: increasing with every push into running_
    int64_t sc = 0;   // schedules before this batch index are folded into its counters
    int64_t su = 0;   // updates of batches before this index are folded
    int64_t sb = 0;   // its first implicitly scheduled batch
    bool member = false;
    bool finished = false;  // stopped by the update in progress (compacted out at its end)
    // What its next schedule event takes from the pool when it stays one decode (lazy_predict):
    // 1 a new block, 0 none (a block becomes cached), -1 it may stop or leave the steady phase
    // there (a quiet step then leaves the event to schedule()).
    int8_t event_blocks = -1;
    // Its event (-1) is its stop, which quiet_run_step(true) can run (lazy_predict). Sync: the
    // decode its update stops it with, taking finish_blocks (0 or 1) new blocks; async: its
    // max_tokens stop, which the RUNNING loop skips.
    bool quiet_finish = false;
    int8_t finish_blocks = 0;
    bool stop_at_max_tokens = false;  // its stop bound is max_tokens' (lazy_predict)
    // The schedule (a batch index) at which its stop bound makes the event -1 (lazy_predict).
    int64_t stop_batch = INT64_MAX;
    // Lazy cache marks: the schedule that completes its last block before its next event, whose
    // mark then waits for that event (INT64_MAX: none); pending while sc <= it.
    int64_t mark_batch = INT64_MAX;
  };
  // Pending cache marks by batch (lz_count_marks_): a member's mark is counted while it is a
  // member with a mark not yet folded (sc <= mark_batch); slot mark_batch & lz_marks_mask_
  // holds that batch and its count. A mark lies at most a block ahead of the schedule that
  // predicts it and is uncounted by the member's next event (the schedule after it), so the
  // ring (four blocks' steps or more) never holds two batches in one slot; if it ever did,
  // lz_marks_overflow_ leaves every later count to the pass over the members.
  struct MarkSlot {
    int64_t batch = -1;
    int32_t count = 0;
  };
  std::vector<MarkSlot> lz_marks_;
  uint64_t lz_marks_mask_ = 0;
  bool lz_marks_overflow_ = false;
  static bool mark_counted(const LazyRunning& l) {
    return l.member && l.mark_batch != INT64_MAX && l.sc <= l.mark_batch;
  }
  MarkSlot& mark_slot(int64_t batch) {
    return lz_marks_[static_cast<size_t>(static_cast<uint64_t>(batch) & lz_marks_mask_)];
  }
  // Around every change of a member's member, sc or mark_batch: uncount before, count after.
  void mark_uncount(const LazyRunning& l) {
    if (!lz_count_marks_ || !mark_counted(l)) return;
    MarkSlot& s = mark_slot(l.mark_batch);
    if (s.batch == l.mark_batch && s.count > 0) --s.count;
  }
  void mark_count(const LazyRunning& l) {
    if (!lz_count_marks_ || !mark_counted(l)) return;
    MarkSlot& s = mark_slot(l.mark_batch);
    if (s.count == 0) s.batch = l.mark_batch;
    if (s.batch != l.mark_batch) [[unlikely]] {
      lz_marks_overflow_ = true;
      return;
    }
    ++s.count;
  }
  struct LazyDeparted {  // a former member implicitly in a pending batch
    int64_t key = 0;
    Request* request = nullptr;
  };
  bool lazy_ = false;
  // lazy_pending_cache_marks by a pass over the members.
  int64_t lazy_count_pending_cache_marks(int64_t batch) const;
  bool lz_cache_marks_ = false;  // SchedulerConfig::lazy_cache_marks, in effect (sync lazy runs)
  bool lz_count_marks_ = false;  // ... with count_pending_cache_marks: lz_marks_ kept
  int64_t lz_sched_done_ = 0;    // schedule() calls completed
  int64_t lz_upd_done_ = 0;      // update_from_output() calls completed
  int64_t lz_next_key_ = 0;
  int64_t lz_sum_computed_ = 0;  // Σ exact num_computed_tokens over members
  int64_t lz_num_members_ = 0;
  size_t lz_first_finished_ = SIZE_MAX;  // lowest running index the current update finished
  // A member's next schedule event (a batch index); INT64_MIN for a non-member, so the RUNNING
  // loop's one test sends it down the general path.
  std::vector<int64_t> lz_next_sched_;
  // The members with an event in the quiet step at hand (running indices, running order): the
  // first lz_quiet_count_ entries. Sized to at least running_.size() before it is filled (a
  // member is listed once), so the fill writes through a pointer with no capacity checks.
  std::vector<uint32_t> lz_quiet_events_;
  size_t lz_quiet_count_ = 0;
  // The running indices quiet_run_step(true) scheduled for their last token (running order),
  // until quiet_run_finish().
  std::vector<uint32_t> lz_quiet_finishers_;
  // quiet_run_step's part for one (its context: computed tokens before the decode).
  int64_t lazy_quiet_finish_schedule(size_t running_index);
  // Async: quiet_run_step's part for a member at its max_tokens stop (it departs, unscheduled),
  // and the pending batch's update of the departed members' tokens (they finish).
  void lazy_quiet_finish_skip(size_t running_index);
  void lazy_apply_departed(SchedulerOutput& out, int64_t batch);
  // The update's part for a finisher's last token (throws std::logic_error if it does not stop
  // the request, naming `when`).
  void lazy_apply_last_token(SchedulerOutput& out, Request& r, const char* when);
  uint32_t* lz_quiet_buffer() {
    if (lz_quiet_events_.size() < running_.size()) lz_quiet_events_.resize(running_.size());
    return lz_quiet_events_.data();
  }
  // Quiet runs' agenda (quiet_run_step): every member, by request id, in the list of the step
  // of its next schedule event modulo kAgendaSteps, so that a quiet step finds its events
  // without a pass over every member. Kept by every write of a member's lz_next_sched_
  // (lazy_set_next_sched: the lists are doubly linked, a move is O(1)); keyed by request id, it
  // survives running_'s compaction and every general step. A member whose event lies
  // kAgendaSteps or more steps ahead shares a nearer step's list: a step reads only the members
  // of its list whose event is that step. Invariant: a request id is linked iff it is a running
  // member, in list lz_next_sched_ & (kAgendaSteps - 1) of its running index, and bit k of
  // agenda_mask_ is set iff list k is not empty.
  static constexpr int64_t kAgendaSteps = 64;
  struct AgendaLink {
    int32_t next = -1;  // request ids, -1: none (prev -1: the list's head)
    int32_t prev = -1;
  };
  std::array<int32_t, kAgendaSteps> agenda_head_{};  // a request id, -1: empty
  std::vector<AgendaLink> agenda_links_;             // by request id
  uint64_t agenda_mask_ = 0;
  static size_t agenda_slot(int64_t step) {
    static_assert((kAgendaSteps & (kAgendaSteps - 1)) == 0);
    return static_cast<size_t>(static_cast<uint64_t>(step) & (kAgendaSteps - 1));
  }
  void agenda_link(int32_t id, int64_t step);
  void agenda_unlink(int32_t id, int64_t step);  // step: the list it is in
  // Sets running index i's next schedule event (request `id`'s), moving it in the agenda:
  // INT64_MIN for none (a departure); from INT64_MIN, a join.
  void lazy_set_next_sched(size_t i, int32_t id, int64_t next);
  // The events of quiet step `batch` from the agenda: the members listed (lz_quiet_events_,
  // running order), passed_min a lower bound on the others' next events (each list's step, or
  // for this step's list batch + kAgendaSteps), and true when lazy_schedule_event() succeeds
  // for each: its event predicted to stay one decode (event_blocks >= 0), or with `finishes` its
  // last decode (quiet_finish), and the pool holding the new blocks they take. Changes nothing.
  bool agenda_quiet_events(int64_t batch, int64_t& passed_min,
                           bool finishes);  // quiet_run_step_inline only
  // outputs_[k] was written by a quiet step and by nothing since but its quiet update: every
  // field but new_block_ids and the quiet step's scalars is as clear() leaves it.
  std::array<bool, 2> lz_quiet_output_{};
  // A member's next update event (a batch index); INT64_MAX for a non-member.
  std::vector<int64_t> lz_next_update_;
  // Invariant: no element of lz_next_update_ is below it (a lower bound, lowered by every
  // prediction, made exact again by update_from_output's scan). A member's next schedule event
  // is its next update event plus lazy_sched_minus_update(), so this bounds both: an update of a
  // batch below it has no member event to merge, and a schedule of a batch below it plus that
  // offset, with every running request a member, schedules them all implicitly.
  int64_t lz_update_bound_ = INT64_MAX;
  int64_t lazy_sched_minus_update() const { return config_.async_scheduling ? 1 : 0; }
  // Every running request is a member and none has a schedule event in `batch` (the bound).
  bool lazy_members_quiet_at(int64_t batch) const {
    return lazy_ && static_cast<size_t>(lz_num_members_) == running_.size() &&
           lz_update_bound_ > batch - lazy_sched_minus_update();
  }
  std::vector<int32_t> lz_pos_;  // by request id: its index in running_ (-1: not running)
  std::vector<LazyRunning> lz_;
  std::array<std::vector<LazyDeparted>, 2> lz_departed_;  // by batch index % 2
  std::vector<UnreportedTokens> lz_unreported_;           // by request id
  struct LazyUpdateItem {
    int64_t key = 0;
    Request* request = nullptr;
    int32_t running_index = -1;  // a member's event (-1: a departed one)
  };
  std::vector<LazyUpdateItem> lz_items_;  // update_from_output's merged list (scratch)
  std::vector<int64_t> lz_processed_;     // ids this update applied a token to
  void lazy_push_running(Request* r);
  void lazy_pop_running();      // before running_.pop_back(): a member departs first
  void lazy_compact_running();  // running_'s finished requests go, in order
  // update_from_output's per-request body for one token of batch `out` (s: its entry, or null
  // for an implicit decode of a member or departed member).
  void apply_sampled_token(SchedulerOutput& out, ScheduledRequest* s, Request& r,
                           bool& any_finished_running);
  void lazy_settle(size_t running_index);
  void lazy_depart(size_t running_index);
  // A member's schedule event that is one decode whose allocation succeeds: allocates (or
  // caches) through the general code, counts it as implicit and returns true. False (nothing
  // changed but the member settled): it must depart and run the general code.
  bool lazy_schedule_event(size_t running_index);
  bool lazy_skips(const Request& r) const;  // the RUNNING loop passes over this steady request
  // lazy_schedule_event() of a member agenda_quiet_events() listed (throws std::logic_error if
  // the predicted allocation fails).
  void lazy_quiet_event(size_t running_index);
  // The end of a member's served schedule event: _update_after_schedule and the next prediction.
  void lazy_event_scheduled(size_t running_index);
  // A quiet step's usual event, a member's decode crossing into a new block (event_blocks 1),
  // served without settling the member (KVCacheManager::append_block_lazily): its token stays
  // with the lazy clocks, and its next event is block_size schedules later or its stop bound,
  // whichever comes first (what lazy_predict would find). False, changing nothing, when the
  // event needs lazy_quiet_event() (another kind, or a table that is not in that case).
  bool lazy_light_event(size_t running_index, int64_t batch);
  // Its body, inlined into the quiet steps' event loop (detail/scheduler_quiet_step.h).
  bool lazy_light_event_body(size_t running_index, int64_t batch);
  // Async: the tokens in flight already reach max_tokens, so another step would be wasted
  // (vLLM: num_computed + 2 - placeholders >= prompt + max_tokens). The RUNNING loop skips it.
  static bool in_flight_reaches_max_tokens(const Request& r) {
    return r.num_output_placeholders > 0 &&
           int64_t{r.num_computed_tokens} + 2 - r.num_output_placeholders >=
               int64_t{r.num_prompt_tokens} + r.max_tokens;
  }
  void lazy_predict(size_t running_index);
  // From a state given as the canonical one before schedule `next_schedule`: computed ==
  // tokens == x, num_output, the table as it is now.
  void lazy_predict_from(size_t running_index, int64_t x, int64_t num_output,
                         int64_t next_schedule);
  bool lazy_is_steady(const Request& r) const;
  void lazy_after_update();
  // Async, end of schedule(): fresh admissions whose prompt is all scheduled join (see there).
  void lazy_join_admitted(const SchedulerOutput& out);
};

}  // namespace kvsim
