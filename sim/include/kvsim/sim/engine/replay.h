// The replay engine: a trace becomes Requests, the Scheduler runs them step by step on an integer
// nanosecond clock, each step's KV work goes to a KvBackend, and metrics are collected.
//
// Scheduling mode: SchedulerConfig::async_scheduling selects vLLM's sync loop (EngineCore.step)
// or its async batch queue (EngineCore.step_with_batch_queue, engine_core.h); the clock rules
// for two batches in flight are below and in docs/scheduler.md §Clock.
// Clock: int64 nanoseconds. Arrivals must be in [0, kMaxArrivalNs] (2^62, trace.h) and a step
// is at most kMaxStepSeconds (step_time_model.h); every clock addition is overflow-checked and a
// run that would pass 2^63 - 1 ns throws std::runtime_error ("simulated clock overflow at step N").
// Clock rules (docs/scheduler.md §Clock), exactly:
//   * before each schedule(), every request with arrival <= t is added, in trace order;
//   * a step that schedules >= 1 token advances t by StepTimeModel::step_time_ns; a step that
//     schedules nothing costs no time (SWAP mode adds transfer time: see below);
//   * when nothing runs or waits, t jumps to the next arrival (no step is logged);
//   * a token sampled by a step exists at the step's end time (TTFT, finish).
// Async mode, with two batches in flight: the GPU runs batches back to back, so batch k+1
// starts at max(t, end of batch k) and lasts its step time; schedule(k+1) happens at t = the
// end of batch k-1 (when update(k-1) returned), so it sees the arrivals up to then; processing
// batch k sets t to batch k's end, where its tokens exist. A zero-token batch lasts 0 ns.
// Rejections (never a hang): at arrival (Scheduler::check_new_request), at run time when a step
// schedules nothing while nothing runs, nothing was preempted and requests wait (the head is
// aborted: never_admittable), and - with the full-sequence gate off - a preempted request that
// outgrew the pool. A general livelock guard throws std::runtime_error with a diagnosis when
// `livelock_steps` consecutive schedule() calls make no progress (schedule no token, or only
// recompute tokens already computed once while nothing finishes). The default (0 = auto) is
// 10000 + 2*cdiv((N-1)*block_size, max_num_batched_tokens): beyond the longest legitimate
// recompute of a full pool.
// The StepBatch (slot mapping, block tables) is built only for a backend that is not the
// NullKvBackend, so the default path does no per-token work.
// Swap preemption (SchedulerConfig::preemption_mode == SWAP): each step's swap transfers add
// (swapped blocks * swap_bytes_per_block) / swap_bandwidth_bytes_per_s to its duration, not
// overlapped with compute; a step that only swaps out (it preempted and scheduled nothing)
// costs exactly that transfer time and its batch (swaps only) still goes to the backend.
// Determinism: the result depends only on the inputs (wall_seconds excepted).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/request.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/sched/scheduler.h"
#include "kvsim/sim/stats/latency_stats.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"

namespace kvsim {

struct TimelineRow;

// A row that is the last row given to a sink with the step one more and only the clock, the
// duration and the four block columns changed (a quiet step's row after its run's first,
// ReplicaEngine::run_quiet_steps): what a sink stores for it, 32 bytes instead of a row's 112.
// used_blocks < 0 never describes a row: TimelineSink's room uses it to mark a whole row.
struct TimelineStepDelta {
  int64_t time_ns = 0;
  int64_t duration_ns = 0;
  int32_t used_blocks = 0;
  int32_t free_blocks = 0;
  int32_t cached_blocks = 0;
  int32_t padding_tokens = 0;
};

// Takes the timeline rows as a replay logs them (ReplayConfig::timeline_sink), in step order.
// An exception from add() ends the replay as any other error does.
// A sink may offer room for the next rows: put() and put_successor() store a row there without a
// call and go to add() only when the room is used up (or never offered), so a writer that
// buffers rows costs the replay one copy a row (issue 27). The room is two arrays
// filled in step: entries [entry_next_, entry_end_), one per row, a TimelineStepDelta for a
// successor and a marker (used_blocks = kWholeRowMarker) for a whole row, whose row goes to
// [next_, ...). Invariant: the rows' room is at least the entries' (a whole row takes one of
// each; so offering as many of both keeps it). add() must take the rows the room did not, in
// order after those it did.
class TimelineSink {
 public:
  static constexpr int32_t kWholeRowMarker = -1;
  virtual ~TimelineSink() = default;
  virtual void add(const TimelineRow& row) = 0;
  void put(const TimelineRow& row);  // inline below, where TimelineRow is complete
  // `row` is the successor of the last row given (by put, put_successor or add): its step is
  // that row's + 1 and only time_ns, duration_ns, used_blocks, free_blocks, cached_blocks and
  // padding_tokens may differ. Without room, or with a count an entry cannot hold, add() takes
  // it whole.
  void put_successor(const TimelineRow& row);

 protected:
  TimelineStepDelta* entry_next_ = nullptr;
  TimelineStepDelta* entry_end_ = nullptr;
  TimelineRow* next_ = nullptr;
};

struct RequestRecord;

// Takes a replay's per-request records (ReplayConfig::request_sink) in trace order, each once it
// is final, instead of the replay holding them all (a streamed replay then keeps only the records
// that finished before an earlier one did). An exception from add() ends the replay as any
// other error does.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void add(const RequestRecord& record) = 0;
};

struct ReplayConfig {
  SchedulerConfig scheduler;
  bool record_timeline = true;  // one TimelineRow per logged step
  // With record_timeline: each row goes to this sink as the step is logged instead of into
  // ReplayResult::timeline, which stays empty, so a writer streams the rows (the CLI's
  // --timeline, issue 27) and memory does not grow with the steps. The rows and every other
  // result are the same either way. Honoured by run_replay (both drivers); a cluster replay
  // (run_cluster_replay) merges its replicas' held rows and must not be given one. Not owned.
  TimelineSink* timeline_sink = nullptr;
  bool record_requests = true;  // keep every RequestRecord in the result
  // With record_requests: the records go to this sink, in trace order, instead of into
  // ReplayResult::requests, which stays empty (the CLI's --requests streams them into its file).
  // Honoured by run_replay (both drivers; the whole-trace one hands them over at the end); a
  // cluster replay must not be given one. Not owned.
  RequestSink* request_sink = nullptr;
  bool check_invariants = false;  // KVCacheManager::check_invariants() after every step (tests)
  // Speed only, never behaviour: steady decodes are scheduled and updated lazily, so a step
  // costs O(events) rather than O(running) (SchedulerConfig::lazy_steady_decodes). Every block
  // id, counter, timeline row and record is the same either way (tests/sim/
  // engine/test_steady_decode.cpp replays both). Only null-backend replays without check_invariants
  // use it, and only FCFS recompute scheduling (async or sync) on a single full-attention group.
  bool steady_decode = true;
  int64_t livelock_steps = 0;  // token-less steps before giving up; 0 = auto (see above)
  int64_t progress_every_steps = 8192;
  // SWAP mode: bytes one block occupies on host (all layers: the planner's bytes_per_block) and
  // the host<->device bandwidth; the transfer time is swapped bytes / bandwidth (> 0).
  int64_t swap_bytes_per_block = 0;
  double swap_bandwidth_bytes_per_s = 25e9;
};

// Per-request outcome. Times are replay-clock ns; -1 = never happened.
struct RequestRecord {
  int64_t request_id = 0;
  int64_t source_line = 0;
  int32_t prompt_tokens = 0;
  int32_t max_tokens = 0;     // the trace's output length (0 becomes 1)
  int32_t output_tokens = 0;  // generated
  int32_t priority = 0;
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = -1;
  int64_t first_token_ns = -1;
  int64_t finish_ns = -1;
  int32_t preemptions = 0;
  int64_t scheduled_tokens = 0;   // every token scheduled for it, recomputation included
  int64_t recomputed_tokens = 0;  // scheduled at positions it had already computed once
  int64_t prefix_hit_tokens = 0;  // sum over its admissions of the prefix-cache hit
  int32_t swap_outs = 0;          // preemptions that kept its KV on host (SWAP mode)
  int32_t computed_high_water = 0;
  bool finished = false;
  bool rejected = false;
  RejectReason reject_reason = RejectReason::EMPTY_PROMPT;  // meaningful iff rejected
};

// One logged step (a step that scheduled tokens, or preempted/aborted without scheduling).
struct TimelineRow {
  int64_t step = 0;
  int64_t time_ns = 0;      // clock at the step's start
  int64_t duration_ns = 0;  // 0 for a step that scheduled nothing, unless it swapped (SWAP mode:
                            // a swap-only step costs its transfer time)
  int32_t running = 0;      // len(running) after schedule()
  int32_t waiting = 0;
  int32_t scheduled_reqs = 0;
  int64_t scheduled_tokens = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int32_t used_blocks = 0;  // N - 1 - free (distinct blocks with ref > 0)
  int32_t free_blocks = 0;
  int64_t cached_blocks = 0;   // blocks holding a prefix-cache hash (in use or evictable)
  int64_t padding_tokens = 0;  // KVCacheManager::padding_tokens() after allocation
  int32_t preemptions = 0;
  AdmissionStop admission_stop = AdmissionStop::QUEUE_EMPTY;
  int32_t swap_out_blocks = 0;  // SWAP mode: blocks copied device -> host this step
  int32_t swap_in_blocks = 0;   // host -> device
  int64_t host_slots_used = 0;  // host swap slots held after the step
};

inline void TimelineSink::put(const TimelineRow& row) {
  if (entry_next_ != entry_end_) [[likely]] {
    *next_++ = row;
    (entry_next_++)->used_blocks = kWholeRowMarker;
    return;
  }
  add(row);
}

inline void TimelineSink::put_successor(const TimelineRow& row) {
  // The block columns are int32 in an entry; a count beyond that (no real pool) goes whole.
  constexpr int64_t kMax = INT32_MAX;
  if (entry_next_ != entry_end_ && row.used_blocks >= 0 && row.cached_blocks >= 0 &&
      row.cached_blocks <= kMax && row.padding_tokens >= 0 && row.padding_tokens <= kMax)
      [[likely]] {
    TimelineStepDelta& e = *entry_next_++;
    e.time_ns = row.time_ns;
    e.duration_ns = row.duration_ns;
    e.used_blocks = row.used_blocks;
    e.free_blocks = row.free_blocks;
    e.cached_blocks = static_cast<int32_t>(row.cached_blocks);
    e.padding_tokens = static_cast<int32_t>(row.padding_tokens);
    return;
  }
  add(row);
}

// One KV cache group of a hybrid layout over the replay (ReplaySummary::kv_cache_groups).
struct KVCacheGroupSummary {
  std::string kind;    // to_string(KVCacheSpecKind)
  int32_t window = 0;  // sliding window or attention chunk, tokens (0: full)
  int32_t num_layers = 0;
  double mean_kv_usage = 0;  // blocks held by this group / (N - 1), mean over steps
  double peak_kv_usage = 0;
  double padding_tokens_mean = 0;          // this group's share of padding_tokens_mean
  int64_t blocks_freed_out_of_window = 0;  // freed by remove_skipped_blocks while running
};

// Aggregates over the whole replay (the JSON summary's source).
struct ReplaySummary {
  int64_t requests = 0;  // trace requests offered
  int64_t finished = 0;
  // Of those, stopped by max_model_len before max_tokens (vLLM FINISHED_LENGTH_CAPPED, but cut
  // short: the trace asked for more output than the context holds).
  int64_t finished_at_max_model_len = 0;
  int64_t rejected = 0;
  std::array<int64_t, kNumRejectReasons> rejected_by_reason{};
  int64_t steps = 0;        // schedule() calls that scheduled >= 1 token
  int64_t sim_ns = 0;       // clock at the end
  int64_t busy_ns = 0;      // sum of step durations
  double wall_seconds = 0;  // host time of run_replay (the only non-deterministic field)
  // Request states (Request + record + table rows) held at once: every trace request for a
  // replay of the trace read whole; for a streaming replay the peak in flight plus those waiting
  // to be reused. Not in the reports: it describes kvsim's memory, not the engine's.
  int64_t request_slots = 0;
  int32_t num_gpu_blocks = 0;
  int32_t block_size = 0;
  int32_t max_model_len = 0;
  int32_t peak_running = 0;
  double mean_running = 0;  // over steps
  int32_t p50_running = 0;
  int32_t p99_running = 0;
  std::vector<int64_t> running_histogram;  // [k] = steps with k running
  int64_t preemptions = 0;
  int64_t preempted_requests = 0;  // distinct
  int64_t recomputed_tokens = 0;
  // Swap preemption (all zero in RECOMPUTE mode).
  int64_t host_swap_slots = 0;
  int64_t swap_bytes_per_block = 0;
  double swap_bandwidth_bytes_per_s = 0;
  int64_t swap_outs = 0;       // preemptions whose KV went to host
  int64_t swap_ins = 0;        // re-admissions with KV from host
  int64_t swap_fallbacks = 0;  // SWAP preemptions recomputed because host slots ran out
  int64_t swap_out_blocks = 0;
  int64_t swap_in_blocks = 0;
  int64_t swap_out_bytes = 0;
  int64_t swap_in_bytes = 0;
  int64_t swap_ns = 0;  // transfer time added to step durations
  int64_t peak_host_slots_used = 0;
  int64_t scheduled_tokens = 0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t generated_tokens = 0;
  double mean_finished_length = 0;  // prompt + output tokens of a finished request, mean
  double padding_tokens_mean = 0;   // over steps
  int64_t padding_tokens_peak = 0;
  double padding_fraction_mean = 0;  // padding / (used_blocks * block_size), over steps with used
  double peak_kv_usage = 0;          // max over steps of used / (N - 1)
  double mean_kv_usage = 0;
  // Hybrid KV layouts only (empty for one full-attention group): per group, in group order. The
  // totals above (usage, padding) are over all groups: one block holds one group's page of
  // every layer of that group.
  std::vector<KVCacheGroupSummary> kv_cache_groups;
  int64_t window_blocks_freed = 0;  // Σ blocks_freed_out_of_window
  // Async scheduling's costs (all zero in sync mode).
  bool async_scheduling = false;
  int64_t async_ahead_tokens = 0;      // tokens scheduled at the position of a token in flight
  int64_t async_ahead_blocks = 0;      // blocks allocated for such positions (one step early)
  int64_t async_late_free_blocks = 0;  // blocks of finished requests freed after the next
                                       // schedule() (held one step longer than in sync mode)
  int64_t async_late_free_requests = 0;
  // Steps that scheduled lazy steady decodes (ReplayConfig::steady_decode). A speed
  // diagnostic, not a result: never reported (JSON, text) so that outputs do not depend on it.
  int64_t steady_decode_steps = 0;
  // vLLM's counters as the 0.26.0 wheel records them: every prefix lookup, including lookups of
  // a request whose admission then fails and is retried; preempted requests apart (exclusive).
  PrefixCacheStats prefix_cache;
  double prefix_cache_hit_rate = 0;  // hits / queries (tokens, non-preempted: vLLM's counters)
  // The user-meaningful share: over admissions that looked the cache up (new and resumed, not
  // swapped in), prompt (+ generated) tokens served from the cache / tokens the request had.
  int64_t prefix_hit_tokens = 0;  // = admission hits
  int64_t admission_prefix_query_tokens = 0;
  double admission_prefix_hit_rate = 0;
  int64_t prefix_blocks_saved = 0;  // hit tokens / block_size
  int64_t evictions = 0;
  // Steps on which each limit stopped admission while requests were waiting.
  int64_t steps_token_budget_bound = 0;
  int64_t steps_max_num_seqs_bound = 0;
  int64_t steps_kv_bound = 0;  // allocation failure at admission, or a preemption
  int64_t steps_with_waiting = 0;
  LatencyReport latency;
  // Backend.
  std::string backend;
  double backend_device_seconds = 0;
  int64_t backend_bytes_read = 0;
  int64_t backend_bytes_written = 0;
  bool backend_verified = false;
  BackendVerification verification;
  std::string step_time_model;
  std::string step_time_calibration;  // StepTimeModel::calibration()
};

struct ReplayResult {
  ReplaySummary summary;
  std::vector<TimelineRow> timeline;
  std::vector<RequestRecord> requests;
};

// Called every `progress_every_steps` steps and once at the end (done == total).
using ProgressCallback =
    std::function<void(int64_t done_requests, int64_t total_requests, int64_t sim_ns)>;

// Runs the whole trace. Throws std::invalid_argument for a bad config and std::runtime_error
// from the livelock guard. The backend's verify() is called at the end unless it is the null one.
ReplayResult run_replay(const ReplayConfig& config, const Trace& trace, KvBackend& backend,
                        const StepTimeModel& step_time, const ProgressCallback& progress = {});

// The streaming replay (TraceStream): the same result as run_replay over
// read_trace(path, options) (every block id, timeline row and summary field; wall_seconds
// aside), with the trace read a second time instead of held and each request's state (Request,
// record, the scheduler's and KV manager's tables) in a slot reused once the request is done,
// so memory follows the requests in flight. With config.record_requests the records are kept
// too (copied out of a slot before its reuse), in trace order as the whole-trace replay gives
// them: memory then grows with the trace by one RequestRecord a request, unless a request_sink
// takes them (then only the records that became final before an earlier one are held).
ReplayResult run_replay(const ReplayConfig& config, const TraceStream& trace, KvBackend& backend,
                        const StepTimeModel& step_time, const ProgressCallback& progress = {});

// The Request a trace record becomes (id = its index in the trace): prompt content from token
// ids, else hash ids, else a unique salt (id + 1); max_tokens = max(1, output_tokens).
Request make_request(const TraceRequest& t, int64_t request_id);

// Default max_model_len (docs/scheduler.md §Clock, "Defaults", trace part): 1 + max(input +
// output). Throws TraceError naming the file, line and length fields of a request whose
// length + 1 exceeds int32.
int32_t default_max_model_len(const Trace& trace);

}  // namespace kvsim
