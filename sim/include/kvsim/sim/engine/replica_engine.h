// ReplicaEngine: one engine replica (Scheduler + KVCacheManager + step-time model + backend) that
// a driver advances one engine-loop iteration at a time. run_replay is the one-replica driver
// (replay.cpp); run_cluster_replay drives N of them on one event clock (cluster_replay.h).
//
// Driving contract (what makes a replica follow run_replay's clock rules, replay.h):
//   * add_request(id) hands over a request; requests are added in arrival order, and every
//     request whose arrival is <= next_event_ns() must be added before step() is called;
//   * next_event_ns() is the replica's clock when it has work (a step is due now), the next
//     added request's arrival when it is idle, kNoEvent when it is idle with nothing added;
//   * step() runs one iteration of vLLM's engine loop at next_event_ns(): it first moves every
//     added request with arrival <= the clock into the scheduler (an idle replica's clock first
//     jumps to the next arrival), then schedules/executes/updates as run_replay's sync or async
//     loop does (one EngineCore.step()). A step may leave the clock unchanged (a batch queued in
//     async mode, a step that scheduled nothing).
// Requests and their records live in a ReplayRequests shared by all replicas of a run (request
// id = trace index, so hashes and salts are the same whatever the routing); a replica touches
// only the requests added to it.
// Router-facing state: outstanding requests (added, not finished or rejected), queued requests
// and their prompt tokens (added, never scheduled yet), KV usage, and a read-only prefix-cache
// probe (cached_prefix_tokens) that changes neither the cache nor vLLM's prefix-cache counters.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/request.h"
#include "kvsim/core/step_batch.h"
#include "kvsim/sim/engine/engine_core.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/sched/scheduler.h"
#include "kvsim/sim/stats/latency_stats.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// The requests an engine runs, by slot: requests[i] and records[i] belong to the request whose
// Request::request_id is i. A whole-trace run (make_replay_requests) gives trace request i slot
// i for the whole run; a streaming run (run_replay over a TraceStream) reuses the slot of a
// request that is done (Scheduler::id_reusable), so memory follows the requests in flight.
// RequestRecord::request_id is always the trace index, Request::external_id too when slots are
// reused. `requests` is a deque: the scheduler holds pointers into it while it grows.
struct ReplayRequests {
  std::deque<Request> requests;
  std::vector<RequestRecord> records;
};

// Builds them, checking that arrivals lie in [0, kMaxArrivalNs] and are sorted (throws
// std::invalid_argument naming the trace, request and line).
ReplayRequests make_replay_requests(const Trace& trace);
// That check for trace request `index` (the previous one arrived at previous_arrival_ns).
void check_arrival(const std::string& path, int64_t index, const TraceRequest& tr,
                   int64_t previous_arrival_ns);
// The record of trace request `index` before it runs (`r` = make_request(tr, index)).
RequestRecord make_request_record(const TraceRequest& tr, const Request& r, int64_t index);

// What run_replay refuses before it starts (std::invalid_argument): negative livelock_steps,
// progress_every_steps < 1, a bad swap setting.
void check_replay_config(const ReplayConfig& config, const KvBackend& backend);

// Per-step running sums of one replica, kept raw so that replicas can be pooled (a cluster's
// means are over the union of its replicas' steps).
struct ReplayStepSums {
  int64_t sum_running = 0;
  // Σ padding tokens over steps: an integer, exact (a double summed them exactly below 2^53).
  int64_t sum_padding = 0;
  double sum_padding_fraction = 0;
  int64_t padding_fraction_steps = 0;  // steps with used blocks
  double sum_usage = 0;
  int64_t usage_steps = 0;
  int64_t finished_length = 0;  // Σ prompt + output tokens of finished requests
  // Hybrid layouts: per group, Σ over steps of usage and of padding, and the peak usage.
  std::vector<double> group_usage_sum;
  std::vector<double> group_usage_peak;
  std::vector<double> group_padding_sum;
};

// Fills the summary's derived fields from its counters and the sums: mean/p50/p99 running,
// padding and usage means, mean finished length, hit rates, blocks saved, per-group means.
void derive_replay_summary(const ReplayStepSums& sums, ReplaySummary& s);

class ReplicaEngine {
 public:
  static constexpr int64_t kNoEvent = std::numeric_limits<int64_t>::max();

  // `config` must have passed check_replay_config; all references must outlive the engine.
  ReplicaEngine(const ReplayConfig& config, KvBackend& backend, const StepTimeModel& step_time,
                ReplayRequests& requests);
  ReplicaEngine(const ReplicaEngine&) = delete;
  ReplicaEngine& operator=(const ReplicaEngine&) = delete;

  // Hands trace request `id` to this replica (see the driving contract above).
  void add_request(int64_t id);
  int64_t next_event_ns() const;
  void step();
  // Runs step() while it would be a quiet step (Scheduler::quiet_run_step), the
  // clock is before `before_ns` (where the driver adds its next request) and fewer than
  // `max_steps` ran: what that many step() calls do, without their checks per step. Returns the
  // steps run (0: call step()). Drivers call it before step() in their loops.
  int64_t run_quiet_steps(int64_t before_ns, int64_t max_steps);
  // Ends the run: clock, backend verification (non-null backends), derived summary fields,
  // latency percentiles of this replica's finished requests.
  void finish();

  // State a router reads.
  int64_t clock_ns() const { return t_; }
  int64_t num_outstanding() const { return num_added_ - done_; }
  int64_t num_queued() const { return queued_requests_; }
  int64_t num_queued_tokens() const { return queued_tokens_; }
  double kv_usage() const { return sched_.kv_cache_manager().usage(); }
  // Prompt (+ generated) tokens of `r` this replica's prefix cache holds now, as vLLM's
  // get_computed_blocks would find them (capped at num_tokens - 1), without recording the
  // lookup. `r` must carry block hashes of the scheduler's block size; 0 with caching off.
  int32_t cached_prefix_tokens(const Request& r) const;

  // From now on, append the id (slot) of every request that finishes or is rejected to `log`
  // (null: stop); the cluster's early-stop check and the streaming driver drain it after each
  // step or arrival.
  void set_done_log(std::vector<int64_t>* log) { done_log_ = log; }

  int64_t num_steps() const { return summary_.steps; }
  int64_t num_done() const { return done_; }  // finished + rejected
  const Scheduler& scheduler() const { return sched_; }
  ReplaySummary& summary() { return summary_; }
  const ReplaySummary& summary() const { return summary_; }
  const ReplayStepSums& step_sums() const { return sums_; }
  // The rows logged so far; empty when they go to a sink (set_timeline_sink).
  std::vector<TimelineRow>& timeline() { return timeline_; }
  // From now on, hand each timeline row to `sink` instead of holding it (null: hold them).
  void set_timeline_sink(TimelineSink* sink) { timeline_sink_ = sink; }
  // Room for the latencies of `num_requests` finished requests (up to the collector's exact
  // limit), so that they are not copied as they grow (a speed hint only).
  void reserve_requests(int64_t num_requests) {
    latency_.reserve(static_cast<size_t>(std::max<int64_t>(num_requests, 0)));
  }

 private:
  bool has_work() const;
  // Moves due arrivals into the scheduler (jumping an idle clock to the next one); false when
  // the replica still has nothing to run.
  bool admit_arrivals();
  void step_sync();
  void step_async();
  void record_pool_state();  // on_step()'s per-step running, padding and KV-usage sums:
  void record_running(int32_t running, int64_t steps);  // the running-request part, `steps` times
  int64_t record_kv_state();  // the padding and KV-usage part; returns the padding tokens
  void arrive(size_t index);
  void reject(size_t index, RejectReason why);
  void leave_queue(const RequestRecord& rec);
  void advance_clock(int64_t dt);
  int64_t batch_end(int64_t start, int64_t dt);
  [[noreturn, gnu::cold]] void clock_overflow(int64_t start, int64_t dt) const;
  void on_step(const SchedulerOutput& out, int64_t start_ns);
  bool after_update(const SchedulerOutput& out);  // true when a request finished
  void finish_record(size_t id);                  // a request that stopped: record, latency
  void log_row(const SchedulerOutput& out, int64_t start_ns, int64_t duration_ns);
  TimelineRow make_row(const SchedulerOutput& out, int64_t start_ns, int64_t duration_ns) const;
  int64_t cached_blocks(const SchedulerOutput& out) const;  // a row's cached_blocks
  void emit_row(const TimelineRow& row);                    // to the sink, or kept
  void catch_up_record(size_t id);  // the scheduler's unreported implicit decodes of a request
  void add_unreported(size_t id, const Scheduler::UnreportedTokens& u);
  int64_t account_swaps(const SchedulerOutput& out);  // returns the transfer time (ns)
  void execute_batch(const SchedulerOutput& out);
  [[noreturn]] void livelock(int64_t steps) const;
  // Distinct blocks held (ref > 0): the usable N - 1 minus the free ones (BlockPool I2).
  int32_t used_blocks() const {
    return sched_.config().num_gpu_blocks - 1 - sched_.kv_cache_manager().num_free_blocks();
  }

  const ReplayConfig& config_;
  KvBackend& backend_;
  const StepTimeModel& step_time_;
  std::deque<Request>& requests_;
  std::vector<RequestRecord>& records_;
  Scheduler sched_;
  EngineCore core_;  // async mode's batch queue over sched_
  bool null_backend_;
  // The step model's per-request host costs, in ns (all 0 unless the model declares some).
  bool has_overheads_ = false;
  int64_t queueing_ns_ = 0;
  int64_t per_output_token_ns_ = 0;
  int64_t completion_ns_ = 0;
  int64_t livelock_limit_ = 0;
  std::deque<int64_t> pending_;  // ids added and not in the scheduler yet, in arrival order
  int64_t num_added_ = 0;
  int64_t queued_requests_ = 0;
  int64_t queued_tokens_ = 0;
  ReplaySummary summary_;
  ReplayStepSums sums_;
  // record_kv_state's values for kv_state_used_ used blocks (-1: none yet; after a call, the
  // used blocks then).
  int32_t kv_state_used_ = -1;
  double kv_state_usage_ = 0;
  double kv_state_block_slots_ = 0;  // used * block_size
  // run_quiet_steps' timeline row, a member: as a local its 112 bytes were zeroed on every call
  // (a rep stos each, ~1 % of a sync replay without a timeline, where the row is never read).
  TimelineRow quiet_row_;
  std::vector<TimelineRow> timeline_;
  LatencyCollector latency_;
  StepBatch batch_;
  int64_t constant_step_ns_ = -1;  // StepTimeModel::constant_step_ns(), -1 when not constant
  int64_t t_ = 0;
  int64_t done_ = 0;        // finished + rejected
  int64_t idle_steps_ = 0;  // consecutive steps without progress (livelock guard)
  bool new_work_ = false;   // the current step computes a position for the first time
  // Async mode: end time of each in-flight batch (by step_index % 2) and of the last one.
  std::array<int64_t, 2> end_ns_{};
  int64_t gpu_free_ns_ = 0;
  std::vector<int64_t>* done_log_ = nullptr;
  TimelineSink* timeline_sink_ = nullptr;
  mutable std::vector<std::vector<BlockId>> probe_scratch_;  // hybrid layouts' probe
};

}  // namespace kvsim
