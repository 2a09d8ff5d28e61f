#include "kvsim/sim/engine/replica_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <fmt/format.h>

#include "kvsim/core/param.h"
#include "kvsim/sim/sched/detail/scheduler_quiet_step.h"

#include "replay_batch.h"

namespace kvsim {

void check_arrival(const std::string& path, int64_t index, const TraceRequest& tr,
                   int64_t previous_arrival_ns) {
  if (tr.arrival_ns < 0 || tr.arrival_ns > kMaxArrivalNs) {
    throw std::invalid_argument(
        fmt::format("trace {}: arrival of request {} (line {}) is {} ns, outside [0, 2^62]", path,
                    index, tr.source_line, tr.arrival_ns));
  }
  if (index > 0 && tr.arrival_ns < previous_arrival_ns) {
    throw std::invalid_argument(fmt::format("trace {}: arrivals not sorted at request {} (line {})",
                                            path, index, tr.source_line));
  }
}

RequestRecord make_request_record(const TraceRequest& tr, const Request& r, int64_t index) {
  RequestRecord rec;
  rec.request_id = index;
  rec.source_line = tr.source_line;
  rec.prompt_tokens = tr.input_tokens;
  rec.max_tokens = r.max_tokens;
  rec.priority = tr.priority;
  rec.arrival_ns = tr.arrival_ns;
  return rec;
}

ReplayRequests make_replay_requests(const Trace& trace) {
  ReplayRequests out;
  const size_t n = trace.requests.size();
  out.records.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const TraceRequest& tr = trace.requests[i];
    const auto index = static_cast<int64_t>(i);
    check_arrival(trace.path, index, tr, i > 0 ? trace.requests[i - 1].arrival_ns : 0);
    out.requests.push_back(make_request(tr, index));
    out.records.push_back(make_request_record(tr, out.requests.back(), index));
  }
  return out;
}

// Any backend replays any layout: a host/cuda backend built for the plan's KV cache groups
// (kv_backend_config_for) takes the grouped batches of a hybrid layout, and refuses, per batch,
// tables that do not match its own groups.
void check_replay_config(const ReplayConfig& config, const KvBackend& /*backend*/) {
  if (config.livelock_steps < 0)
    throw std::invalid_argument("replay: livelock_steps must be >= 0 (0 = auto)");
  if (config.progress_every_steps < 1) {
    throw std::invalid_argument("replay: progress_every_steps must be >= 1");
  }
  if (config.swap_bytes_per_block < 0) {
    throw std::invalid_argument("replay: swap_bytes_per_block must be >= 0");
  }
  if (!(config.swap_bandwidth_bytes_per_s > 0)) {
    throw std::invalid_argument(fmt::format("replay: swap bandwidth must be > 0 bytes/s (got {})",
                                            config.swap_bandwidth_bytes_per_s));
  }
}

namespace {

// Lazy steady decodes (ReplayConfig::steady_decode) leave per-step batches without an entry per
// decode, which only the null backend can take; --check-invariants checks the held-token totals
// the lazy clocks defer.
SchedulerConfig engine_scheduler_config(const ReplayConfig& c, const KvBackend& backend) {
  SchedulerConfig s = c.scheduler;
  s.lazy_steady_decodes =
      c.steady_decode && !c.check_invariants && dynamic_cast<const NullKvBackend*>(&backend);
  // The timeline's rows add the pending marks to the pool's cached count (make_row).
  s.lazy_cache_marks = s.lazy_steady_decodes;
  s.count_pending_cache_marks = c.record_timeline;
  return s;
}

// The timeline holds a row per step (350k rows, 39 MB on a whole Azure conv replay). Grown by
// doubling from 64k rows, and each new buffer asked for transparent huge pages (Linux, where
// THP is on "madvise"): first-touch page faults were most of the cost of recording it
// (issue 27). Only a hint: the contents and the vector's behaviour are the same either way.
void grow_timeline(std::vector<TimelineRow>& timeline) {
  std::vector<TimelineRow> bigger;
  bigger.reserve(std::max<size_t>(timeline.capacity() * 2, size_t{1} << 16));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the copy touches it.
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(bigger.data());
  const uintptr_t end = begin + bigger.capacity() * sizeof(TimelineRow);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = end & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  bigger.insert(bigger.end(), timeline.begin(), timeline.end());
  timeline.swap(bigger);
}

int32_t histogram_percentile(const std::vector<int64_t>& hist, int64_t total, double q) {
  if (total == 0) return 0;
  // Nearest rank: the smallest k whose cumulative count reaches the rank's 1-based position.
  const int64_t rank = nearest_rank_index(q, total) + 1;
  int64_t cum = 0;
  for (size_t k = 0; k < hist.size(); ++k) {
    cum += hist[k];
    if (cum >= rank) return static_cast<int32_t>(k);
  }
  return static_cast<int32_t>(hist.size()) - 1;
}

// A batch's implicit decodes (lazy steady decodes) in its StepWork: one token each at its
// context.
void add_implicit_decodes(StepWork& work, const SchedulerOutput& out) {
  work.num_seqs += out.implicit_decodes;
  work.num_decode_tokens += out.implicit_decodes;
  work.sum_context_tokens += out.implicit_context_tokens;
  work.sum_context_x_new += out.implicit_context_tokens;
  work.sum_new_squared += out.implicit_decodes;
}

}  // namespace

void derive_replay_summary(const ReplayStepSums& sums, ReplaySummary& sum) {
  if (sum.steps > 0) {
    sum.mean_running = static_cast<double>(sums.sum_running) / static_cast<double>(sum.steps);
    sum.padding_tokens_mean =
        static_cast<double>(sums.sum_padding) / static_cast<double>(sum.steps);
  }
  if (sums.padding_fraction_steps > 0) {
    sum.padding_fraction_mean =
        sums.sum_padding_fraction / static_cast<double>(sums.padding_fraction_steps);
  }
  if (sums.usage_steps > 0)
    sum.mean_kv_usage = sums.sum_usage / static_cast<double>(sums.usage_steps);
  for (size_t g = 0; g < sum.kv_cache_groups.size(); ++g) {
    KVCacheGroupSummary& gs = sum.kv_cache_groups[g];
    if (g < sums.group_usage_sum.size() && sums.usage_steps > 0) {
      gs.mean_kv_usage = sums.group_usage_sum[g] / static_cast<double>(sums.usage_steps);
      gs.peak_kv_usage = sums.group_usage_peak[g];
      gs.padding_tokens_mean = sums.group_padding_sum[g] / static_cast<double>(sums.usage_steps);
    }
  }
  sum.p50_running = histogram_percentile(sum.running_histogram, sum.steps, 0.50);
  sum.p99_running = histogram_percentile(sum.running_histogram, sum.steps, 0.99);
  if (sum.finished > 0) {
    sum.mean_finished_length =
        static_cast<double>(sums.finished_length) / static_cast<double>(sum.finished);
  }
  if (sum.prefix_cache.queries > 0) {
    sum.prefix_cache_hit_rate =
        static_cast<double>(sum.prefix_cache.hits) / static_cast<double>(sum.prefix_cache.queries);
  }
  if (sum.admission_prefix_query_tokens > 0) {
    sum.admission_prefix_hit_rate = static_cast<double>(sum.prefix_hit_tokens) /
                                    static_cast<double>(sum.admission_prefix_query_tokens);
  }
  sum.prefix_blocks_saved = sum.block_size > 0 ? sum.prefix_hit_tokens / sum.block_size : 0;
}

ReplicaEngine::ReplicaEngine(const ReplayConfig& config, KvBackend& backend,
                             const StepTimeModel& step_time, ReplayRequests& requests)
    : config_(config),
      backend_(backend),
      step_time_(step_time),
      requests_(requests.requests),
      records_(requests.records),
      sched_(engine_scheduler_config(config, backend)),
      core_(sched_),
      null_backend_(dynamic_cast<NullKvBackend*>(&backend) != nullptr) {
  ReplaySummary& sum = summary_;
  sum.num_gpu_blocks = sched_.config().num_gpu_blocks;
  sum.block_size = sched_.config().block_size;
  sum.max_model_len = sched_.config().max_model_len;
  sum.backend = backend_.name();
  sum.step_time_model = step_time_.describe();
  sum.step_time_calibration = step_time_.calibration();
  constant_step_ns_ = step_time_.constant_step_ns().value_or(-1);
  if (const RequestOverheads o = step_time_.request_overheads(); o.any()) {
    has_overheads_ = true;
    queueing_ns_ = std::llround(o.queueing_s * 1e9);
    per_output_token_ns_ = std::llround(o.per_output_token_s * 1e9);
    completion_ns_ = std::llround(o.completion_s * 1e9);
  }
  sum.host_swap_slots = sched_.config().preemption_mode == PreemptionMode::SWAP
                            ? sched_.config().num_host_swap_slots
                            : 0;
  sum.swap_bytes_per_block = config_.swap_bytes_per_block;
  sum.swap_bandwidth_bytes_per_s = config_.swap_bandwidth_bytes_per_s;
  sum.async_scheduling = sched_.config().async_scheduling;
  // Auto limit: recomputing what fits in the pool legitimately takes up to (N-1)*bs / budget
  // token-less steps (a preempted 100k-token prompt under a small budget); only well beyond that
  // is it a livelock.
  const SchedulerConfig& sc = sched_.config();
  livelock_limit_ = config_.livelock_steps > 0
                        ? config_.livelock_steps
                        : 10000 + 2 * cdiv(int64_t{sc.num_gpu_blocks - 1} * sc.block_size,
                                           std::max(sc.max_num_batched_tokens, 1));
}

void ReplicaEngine::add_request(int64_t id) {
  pending_.push_back(id);
  ++num_added_;
  summary_.requests += 1;
  queued_requests_ += 1;
  queued_tokens_ += requests_[static_cast<size_t>(id)].num_prompt_tokens;
}

bool ReplicaEngine::has_work() const {
  return sched_.config().async_scheduling ? core_.has_work() : sched_.has_unfinished_requests();
}

int64_t ReplicaEngine::next_event_ns() const {
  if (has_work()) return t_;
  if (!pending_.empty()) {
    return std::max(t_, requests_[static_cast<size_t>(pending_.front())].arrival_time_ns);
  }
  return kNoEvent;
}

bool ReplicaEngine::admit_arrivals() {
  auto add_due = [this] {
    while (!pending_.empty()) {
      const auto id = static_cast<size_t>(pending_.front());
      if (requests_[id].arrival_time_ns > t_) break;
      pending_.pop_front();
      arrive(id);
    }
  };
  add_due();
  if (has_work()) return true;
  if (pending_.empty()) return false;
  // Idle: jump to the next arrival (no step logged).
  t_ = requests_[static_cast<size_t>(pending_.front())].arrival_time_ns;
  add_due();
  return has_work();
}

void ReplicaEngine::step() {
  if (!admit_arrivals()) return;
  if (run_quiet_steps(INT64_MAX, 1) > 0) return;
  if (sched_.config().async_scheduling) {
    step_async();
  } else {
    step_sync();
  }
}

void ReplicaEngine::leave_queue(const RequestRecord& rec) {
  queued_requests_ -= 1;
  queued_tokens_ -= rec.prompt_tokens;
}

void ReplicaEngine::reject(size_t index, RejectReason why) {
  RequestRecord& rec = records_[index];
  Request& r = requests_[index];
  catch_up_record(index);
  if (rec.first_scheduled_ns < 0) leave_queue(rec);
  r.status = RequestStatus::FINISHED_ABORTED;
  r.release_block_hashes();
  rec.rejected = true;
  rec.reject_reason = why;
  rec.preemptions = r.num_preemptions;
  if (rec.preemptions > 0) summary_.preempted_requests += 1;
  if (why == RejectReason::NEVER_ADMITTABLE || why == RejectReason::OUTGREW_POOL) {
    // Aborted at run time: what it generated before (vLLM reports those tokens) and when.
    rec.output_tokens = r.num_output_tokens;
    rec.finish_ns = t_;
  }
  ReplaySummary& s = summary_;
  s.rejected += 1;
  s.rejected_by_reason[static_cast<size_t>(why)] += 1;
  ++done_;
  if (done_log_ != nullptr) done_log_->push_back(static_cast<int64_t>(index));
}

void ReplicaEngine::arrive(size_t index) {
  Request& r = requests_[index];
  RejectReason why{};
  if (!sched_.check_new_request(r, &why)) {
    reject(index, why);
    return;
  }
  sched_.add_request(&r);
}

// `steps` steps' running-request sums (integers: adding them at once is adding them per step).
[[gnu::always_inline]] inline void ReplicaEngine::record_running(int32_t running, int64_t steps) {
  ReplaySummary& sum = summary_;
  if (static_cast<size_t>(running) >= sum.running_histogram.size()) {
    sum.running_histogram.resize(static_cast<size_t>(running) + 1, 0);
  }
  sum.running_histogram[static_cast<size_t>(running)] += steps;
  sums_.sum_running += int64_t{running} * steps;
  sum.peak_running = std::max(sum.peak_running, running);
}

// The per-step padding and KV-usage sums (floating point: one step at a time, in step order).
// Inline in on_step() and the quiet steps (a call per step is a measurable part of a quiet step).
// Returns the padding tokens; kv_state_used_ is the used blocks (a quiet step's timeline row
// takes both from here instead of asking the pool again).
[[gnu::always_inline]] inline int64_t ReplicaEngine::record_kv_state() {
  ReplaySummary& sum = summary_;
  const KVCacheManager& kv = sched_.kv_cache_manager();
  const int32_t used = used_blocks();
  // The usage (a function of the used blocks), its peak and the fraction's denominator move
  // only with the used blocks (most steps keep them): recomputed then, the same values, without
  // a division or a comparison a step.
  if (used != kv_state_used_) [[unlikely]] {
    kv_state_used_ = used;
    kv_state_usage_ = kv.usage();
    kv_state_block_slots_ = static_cast<double>(used) * sched_.config().block_size;
    sum.peak_kv_usage = std::max(sum.peak_kv_usage, kv_state_usage_);
  }
  const int64_t padding = kv.padding_tokens();
  sums_.sum_padding += padding;
  sum.padding_tokens_peak = std::max(sum.padding_tokens_peak, padding);
  if (used > 0) {
    sums_.sum_padding_fraction += static_cast<double>(padding) / kv_state_block_slots_;
    ++sums_.padding_fraction_steps;
  }
  sums_.sum_usage += kv_state_usage_;
  ++sums_.usage_steps;
  return padding;
}

// on_step()'s per-step running, padding and KV-usage sums.
[[gnu::always_inline]] inline void ReplicaEngine::record_pool_state() {
  record_running(static_cast<int32_t>(sched_.num_running()), 1);
  record_kv_state();
}

void ReplicaEngine::on_step(const SchedulerOutput& out, int64_t start_ns) {
  // Summary counters are summed in locals and stored once (see step_async).
  const bool prefix_caching = sched_.config().enable_prefix_caching;
  int64_t query_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t recomputed = 0;
  bool new_work = false;
  const bool lazy = sched_.lazy_decodes_active();
  for (const ScheduledRequest& s : out.scheduled) {
    RequestRecord& rec = records_[static_cast<size_t>(s.request_id)];
    if (lazy) catch_up_record(static_cast<size_t>(s.request_id));
    if (rec.first_scheduled_ns < 0) {
      rec.first_scheduled_ns = start_ns;
      leave_queue(rec);
    }
    if ((s.is_new || s.is_resumed) && !s.is_swapped_in && prefix_caching) {
      query_tokens += requests_[static_cast<size_t>(s.request_id)].num_tokens();
    }
    rec.scheduled_tokens += s.num_tokens;
    rec.prefix_hit_tokens += s.num_prefix_hit_tokens;
    hit_tokens += s.num_prefix_hit_tokens;
    const int32_t end = s.num_computed_tokens + s.num_tokens;
    const int32_t redo = std::min(end, rec.computed_high_water) - s.num_computed_tokens;
    if (redo > 0) {
      rec.recomputed_tokens += redo;
      recomputed += redo;
    }
    new_work |= redo < s.num_tokens;
    rec.computed_high_water = std::max(rec.computed_high_water, end);
  }
  // Implicit decodes are always at new positions.
  if (new_work || out.implicit_decodes > 0) new_work_ = true;
  ReplaySummary& sum = summary_;
  if (out.implicit_decodes > 0) sum.steady_decode_steps += 1;
  sum.admission_prefix_query_tokens += query_tokens;
  sum.prefix_hit_tokens += hit_tokens;
  sum.recomputed_tokens += recomputed;
  sum.steps += 1;
  sum.scheduled_tokens += out.total_num_scheduled_tokens;
  sum.prefill_tokens += out.num_prefill_tokens;
  sum.decode_tokens += out.num_decode_tokens;

  record_pool_state();
  const KVCacheManager& kv = sched_.kv_cache_manager();
  if (kv.coordinator() != nullptr) {
    const size_t groups = kv.num_kv_cache_groups();
    sums_.group_usage_sum.resize(groups, 0.0);
    sums_.group_usage_peak.resize(groups, 0.0);
    sums_.group_padding_sum.resize(groups, 0.0);
    const double usable = std::max(1.0, static_cast<double>(sched_.config().num_gpu_blocks - 1));
    for (size_t g = 0; g < groups; ++g) {
      const double u = static_cast<double>(kv.num_held_blocks_in_group(g)) / usable;
      sums_.group_usage_sum[g] += u;
      sums_.group_usage_peak[g] = std::max(sums_.group_usage_peak[g], u);
      sums_.group_padding_sum[g] += static_cast<double>(kv.padding_tokens(g));
    }
  }
}

void ReplicaEngine::log_row(const SchedulerOutput& out, int64_t start_ns, int64_t duration_ns) {
  ReplaySummary& sum = summary_;
  const auto preempted = static_cast<int32_t>(out.preempted_req_ids.size());
  sum.preemptions += preempted;
  if (sched_.has_waiting()) {
    sum.steps_with_waiting += 1;
    switch (out.admission_stop) {
      case AdmissionStop::TOKEN_BUDGET:
        sum.steps_token_budget_bound += 1;
        break;
      case AdmissionStop::MAX_NUM_SEQS:
        sum.steps_max_num_seqs_bound += 1;
        break;
      case AdmissionStop::KV_CACHE:
      case AdmissionStop::PREEMPTED:
        sum.steps_kv_bound += 1;
        break;
      case AdmissionStop::QUEUE_EMPTY:
        break;
    }
  }
  if (config_.record_timeline) emit_row(make_row(out, start_ns, duration_ns));
}

TimelineRow ReplicaEngine::make_row(const SchedulerOutput& out, int64_t start_ns,
                                    int64_t duration_ns) const {
  const KVCacheManager& kv = sched_.kv_cache_manager();
  TimelineRow row;
  row.step = out.step_index;
  row.time_ns = start_ns;
  row.duration_ns = duration_ns;
  row.running = static_cast<int32_t>(sched_.num_running());
  row.waiting = static_cast<int32_t>(sched_.num_waiting());
  row.scheduled_reqs = static_cast<int32_t>(out.scheduled.size()) + out.implicit_decodes;
  row.scheduled_tokens = out.total_num_scheduled_tokens;
  row.prefill_tokens = out.num_prefill_tokens;
  row.decode_tokens = out.num_decode_tokens;
  row.free_blocks = kv.num_free_blocks();
  row.used_blocks = used_blocks();
  row.cached_blocks = cached_blocks(out);
  row.padding_tokens = kv.padding_tokens();
  row.preemptions = static_cast<int32_t>(out.preempted_req_ids.size());
  row.admission_stop = out.admission_stop;
  row.swap_out_blocks = static_cast<int32_t>(out.swap_out.size());
  row.swap_in_blocks = static_cast<int32_t>(out.swap_in.size());
  row.host_slots_used = sched_.num_used_host_slots();
  return row;
}

// The pool's cached blocks as the eager marks would leave them after out's schedule.
int64_t ReplicaEngine::cached_blocks(const SchedulerOutput& out) const {
  return sched_.kv_cache_manager().block_pool().num_cached_blocks() +
         sched_.lazy_pending_cache_marks(out.step_index);
}

void ReplicaEngine::emit_row(const TimelineRow& row) {
  if (timeline_sink_ != nullptr) {
    timeline_sink_->put(row);
    return;
  }
  if (timeline_.size() == timeline_.capacity()) grow_timeline(timeline_);
  timeline_.push_back(row);
}

void ReplicaEngine::advance_clock(int64_t dt) {
  t_ = batch_end(t_, dt);
}

// Arrivals are <= kMaxArrivalNs and steps <= kMaxStepSeconds, so only an absurdly long run
// (~1.3 million one-hour steps) overflows; it must be an error, never a wrapped clock.
// Inline (every step calls it); the error is built out of line.
[[gnu::always_inline]] inline int64_t ReplicaEngine::batch_end(int64_t start, int64_t dt) {
  ReplaySummary& sum = summary_;
  int64_t end = 0;
  int64_t busy = 0;
  if (__builtin_add_overflow(start, dt, &end) || __builtin_add_overflow(sum.busy_ns, dt, &busy))
      [[unlikely]] {
    clock_overflow(start, dt);
  }
  sum.busy_ns = busy;
  return end;
}

void ReplicaEngine::clock_overflow(int64_t start, int64_t dt) const {
  throw std::runtime_error(fmt::format(
      "simulated clock overflow at step {}: t = {} ns plus a step of {} ns leaves 64-bit "
      "nanoseconds (292 years); use a shorter {} or trace",
      summary_.steps, start, dt, param("step_time")));
}

int64_t ReplicaEngine::account_swaps(const SchedulerOutput& out) {
  ReplaySummary& sum = summary_;
  sum.swap_fallbacks += out.num_swap_fallbacks;
  if (out.swap_out.empty() && out.swap_in.empty()) return 0;
  for (int64_t id : out.swapped_out_req_ids) records_[static_cast<size_t>(id)].swap_outs += 1;
  sum.swap_outs += static_cast<int64_t>(out.swapped_out_req_ids.size());
  sum.swap_ins += static_cast<int64_t>(out.swapped_in_req_ids.size());
  const auto out_blocks = static_cast<int64_t>(out.swap_out.size());
  const auto in_blocks = static_cast<int64_t>(out.swap_in.size());
  sum.swap_out_blocks += out_blocks;
  sum.swap_in_blocks += in_blocks;
  sum.swap_out_bytes += out_blocks * config_.swap_bytes_per_block;
  sum.swap_in_bytes += in_blocks * config_.swap_bytes_per_block;
  sum.peak_host_slots_used = std::max(sum.peak_host_slots_used, sched_.num_used_host_slots());
  // Transfers are serialised with the step's compute (no overlap modelled).
  const double bytes = static_cast<double>(out_blocks + in_blocks) *
                       static_cast<double>(config_.swap_bytes_per_block);
  const double seconds = bytes / config_.swap_bandwidth_bytes_per_s;
  if (!(seconds <= kMaxStepSeconds)) {
    throw std::runtime_error(fmt::format(
        "swap transfer of {:g} bytes at {:g} bytes/s takes {:g} s in one step (limit {:g} s)",
        bytes, config_.swap_bandwidth_bytes_per_s, seconds, kMaxStepSeconds));
  }
  const auto ns = static_cast<int64_t>(std::llround(seconds * 1e9));
  sum.swap_ns += ns;
  return ns;
}

void ReplicaEngine::execute_batch(const SchedulerOutput& out) {
  if (null_backend_) return;
  detail::build_step_batch(out, sched_.kv_cache_manager(), batch_);
  const StepExecution ex = backend_.execute(batch_);
  ReplaySummary& sum = summary_;
  sum.backend_device_seconds += ex.device_seconds;
  sum.backend_bytes_read += ex.bytes_read;
  sum.backend_bytes_written += ex.bytes_written;
}

bool ReplicaEngine::after_update(const SchedulerOutput& out) {
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.sampled) continue;
    RequestRecord& rec = records_[static_cast<size_t>(s.request_id)];
    if (rec.first_token_ns < 0) rec.first_token_ns = t_;
  }
  // Entries and implicit decodes alike, in the batch's order. (An implicit decode's request
  // sampled its first token long before.)
  for (const SchedulerOutput::Finished& f : out.finished_in_update) {
    finish_record(static_cast<size_t>(f.request_id));
  }
  return !out.finished_in_update.empty();
}

// Tokens the scheduler scheduled for the request without an entry (lazy steady decodes): each
// at a new position, so on_step would have counted them scheduled and raised the high-water
// mark to the last one's end.
void ReplicaEngine::catch_up_record(size_t id) {
  const Scheduler::UnreportedTokens u = sched_.take_unreported_tokens(static_cast<int64_t>(id));
  if (u.tokens > 0) add_unreported(id, u);
}

void ReplicaEngine::add_unreported(size_t id, const Scheduler::UnreportedTokens& u) {
  RequestRecord& rec = records_[id];
  rec.scheduled_tokens += u.tokens;
  rec.computed_high_water = std::max(rec.computed_high_water, u.end);
}

void ReplicaEngine::finish_record(size_t id) {
  catch_up_record(id);
  RequestRecord& rec = records_[id];
  Request& r = requests_[id];
  rec.finish_ns = t_;
  rec.finished = true;
  rec.output_tokens = r.num_output_tokens;
  rec.preemptions = r.num_preemptions;
  r.release_block_hashes();
  if (has_overheads_) {
    // What the client sees: the engine's times plus the model's host costs (RequestOverheads).
    rec.first_scheduled_ns += queueing_ns_;
    rec.first_token_ns += queueing_ns_ + per_output_token_ns_;
    rec.finish_ns += queueing_ns_ + per_output_token_ns_ * rec.output_tokens + completion_ns_;
  }
  latency_.add({rec.arrival_ns, rec.first_scheduled_ns, rec.first_token_ns, rec.finish_ns,
                rec.output_tokens});
  summary_.finished += 1;
  if (rec.output_tokens < rec.max_tokens) summary_.finished_at_max_model_len += 1;
  summary_.generated_tokens += rec.output_tokens;
  if (rec.preemptions > 0) summary_.preempted_requests += 1;
  sums_.finished_length += rec.prompt_tokens + rec.output_tokens;
  ++done_;
  if (done_log_ != nullptr) done_log_->push_back(static_cast<int64_t>(id));
}

void ReplicaEngine::livelock(int64_t steps) const {
  const KVCacheManager& kv = sched_.kv_cache_manager();
  std::string head = "none";
  if (!sched_.waiting().empty()) {
    const Request* h = sched_.waiting().peek();
    head = fmt::format("request {} ({} tokens, {} computed)",
                       records_[static_cast<size_t>(h->request_id)].request_id, h->num_tokens(),
                       h->num_computed_tokens);
  }
  throw std::runtime_error(fmt::format(
      "replay livelock: {} consecutive steps made no progress (no new token computed) at t={} ns "
      "(running={}, "
      "waiting={}, free blocks={} of {}, waiting head: {}); the configuration cannot make "
      "progress",
      steps, t_, sched_.num_running(), sched_.num_waiting(), kv.num_free_blocks(),
      sched_.config().num_gpu_blocks - 1, head));
}

// step_sync() or step_async() for steps whose batch holds implicit decodes only and whose
// update applies nothing (Scheduler::quiet_run_step), back to back: the same clock, counters and
// rows, without the general code's passes over entries, aborts and finishes (none). Nothing read
// here changes in that update, so doing the accounting after it is the same. A quiet step keeps
// the running requests, so their per-step integer sums (on_step's counts, record_running) are
// added once for the run; the floating-point sums and the clock move per step, in order.
int64_t ReplicaEngine::run_quiet_steps(int64_t before_ns, int64_t max_steps) {
  // step()'s checks, which no quiet step changes: an added request due now must arrive first
  // (admit_arrivals).
  const int64_t arrival = pending_.empty()
                              ? INT64_MAX
                              : requests_[static_cast<size_t>(pending_.front())].arrival_time_ns;
  const int64_t stop_ns = std::min(before_ns, arrival);
  if (max_steps <= 0 || t_ >= stop_ns || !sched_.quiet_run_possible(/*finishes=*/true)) return 0;
  const bool async = sched_.config().async_scheduling;
  const bool timeline = config_.record_timeline;
  ReplaySummary& sum = summary_;
  int64_t done = 0;
  int64_t tokens = 0;  // the implicit decodes of the run (one token each)
  int64_t steady = 0;  // steps with a member's decode (on_step's steady_decode_steps)
  // The running count of the steps since it last moved (a finish moves it; on_step records it
  // per step before the update): its per-step integer sums are added once for those steps.
  int32_t running = -1;
  int64_t running_steps = 0;
  // The timeline row of the run's first step, and of the first after a finish; the later ones
  // change only in the columns a quiet step moves (log_row of a quiet step adds nothing else to
  // the summary: nothing preempted, nothing waiting). Whole before it is read (whole_row).
  TimelineRow& row = quiet_row_;
  bool whole_row = true;
  // Inline: a successor's columns come from this step's record_kv_state() (`padding`, the used
  // blocks; free = usable - used, as used_blocks() defines them), the values make_row() reads.
  const int32_t usable_blocks = sched_.config().num_gpu_blocks - 1;
  auto quiet_row = [&](const SchedulerOutput& out, int64_t start, int64_t dt, int64_t padding)
      __attribute__((always_inline)) {
    if (whole_row) [[unlikely]] {
      row = make_row(out, start, dt);
      emit_row(row);
      whole_row = false;
      return;
    }
    row.step = out.step_index;
    row.time_ns = start;
    row.duration_ns = dt;
    row.used_blocks = kv_state_used_;
    row.free_blocks = usable_blocks - kv_state_used_;
    row.cached_blocks = cached_blocks(out);
    row.padding_tokens = padding;
    if (timeline_sink_ == nullptr) {
      emit_row(row);
    } else {
      timeline_sink_->put_successor(row);  // the row before plus one step, these columns moved
    }
  };
  // A member's stop is a quiet step too (Scheduler::quiet_run_step(true)). Sync: its last
  // decode is in the batch and its finish is applied after the step's state is recorded, as
  // step_sync() records it before the update. Async: it is not in the batch, and the step's
  // update (of the batch before) has finished it, as in step_async(), which records after both.
  do {
    const SchedulerOutput* out = sched_.quiet_run_step_inline(/*finishes=*/true);
    if (out == nullptr) break;
    ++done;
    // The requests in the batch: every running one (sync: finishers too).
    const int32_t implicit = out->implicit_decodes;
    // on_step's count: sync, before the update (the batch); async, after it.
    const int32_t running_now = async ? static_cast<int32_t>(sched_.num_running()) : implicit;
    if (running_now != running) {
      if (running_steps > 0) record_running(running, running_steps);
      running = running_now;
      running_steps = 0;
    }
    ++running_steps;
    tokens += implicit;
    const auto finishers = static_cast<int32_t>(sched_.quiet_step_finishers());
    const SchedulerOutput& updated = sched_.quiet_step_update();
    const bool finished = finishers > 0 || !updated.finished_in_update.empty();
    // Async: an update with entries (a run's first step) samples their tokens.
    const bool entries = async && !updated.scheduled.empty();
    steady += implicit > finishers ? 1 : 0;   // a finisher's decode is an entry of its own
    if (async && finished) whole_row = true;  // its row already shows the finishes
    int64_t dt = constant_step_ns_;
    if (dt < 0) {
      StepWork work;
      add_implicit_decodes(work, *out);
      dt = step_time_.step_time_ns(work, /*overlap_cpu=*/async);
    }
    sum.steps += 1;  // per step: batch_end's overflow error names it
    const int64_t padding = record_kv_state();
    if (async) {
      sum.async_ahead_blocks += out->implicit_new_blocks;
      const int64_t start = std::max(t_, gpu_free_ns_);
      if (timeline) quiet_row(*out, start, dt, padding);
      gpu_free_ns_ = batch_end(start, dt);
      end_ns_[batch_slot(out->step_index)] = gpu_free_ns_;
      // The update was of the batch before.
      t_ = std::max(t_, end_ns_[batch_slot(out->step_index - 1)]);
    } else {
      if (timeline) quiet_row(*out, t_, dt, padding);
      advance_clock(dt);
    }
    if (finished || entries) {
      if (finishers > 0) sched_.quiet_run_finish();
      if (async) {
        for (const SchedulerOutput::Finished& f : updated.finished_in_update) {
          sum.async_late_free_blocks += f.num_freed_blocks;
          sum.async_late_free_requests += 1;
        }
      }
      after_update(updated);  // first tokens of the entries sampled, then the finished requests
      whole_row = whole_row || (!async && finished);  // sync: the count moves from the next row
      if (sched_.num_running() == 0) break;           // no run without a running request
    }
  } while (done < max_steps && t_ < stop_ns);
  if (done == 0) return 0;
  // on_step()'s counts for the run's batches of implicit decodes.
  new_work_ = true;  // implicit decodes are always at new positions
  idle_steps_ = 0;
  sum.steady_decode_steps += steady;
  sum.scheduled_tokens += tokens;
  sum.decode_tokens += tokens;
  if (async) sum.async_ahead_tokens += tokens;
  record_running(running, running_steps);
  return done;
}

// vLLM EngineCore.step(): schedule, execute, update, strictly alternating.
void ReplicaEngine::step_sync() {
  const SchedulerOutput& out = sched_.schedule();
  for (int64_t id : out.aborted_req_ids)
    reject(static_cast<size_t>(id), RejectReason::OUTGREW_POOL);
  if (out.total_num_scheduled_tokens == 0) {
    // Only swap-outs of this step's victims can be pending: they still move data and time.
    const int64_t swap_dt = account_swaps(out);
    if (!out.swap_out.empty()) execute_batch(out);
    sched_.update_from_output();  // nothing to apply; keeps the schedule/update pairing
    if (!out.preempted_req_ids.empty() || !out.aborted_req_ids.empty()) log_row(out, t_, swap_dt);
    advance_clock(swap_dt);
    if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
    if (sched_.num_running() == 0 && out.preempted_req_ids.empty() && sched_.has_waiting()) {
      Request* head = sched_.abort_waiting_head();
      reject(static_cast<size_t>(head->request_id), RejectReason::NEVER_ADMITTABLE);
      idle_steps_ = 0;
      return;
    }
    if (++idle_steps_ >= livelock_limit_) livelock(idle_steps_);
    return;
  }
  // A constant step time needs no account of the work (see step_async).
  const bool timed = constant_step_ns_ < 0;
  StepWork work;  // a local: see step_async
  if (timed) {
    for (const ScheduledRequest& s : out.scheduled) {
      work.add_sequence(s.num_computed_tokens, s.num_tokens, !s.is_decode);
    }
    add_implicit_decodes(work, out);
  }
  execute_batch(out);
  const int64_t dt =
      (timed ? step_time_.step_time_ns(work, /*overlap_cpu=*/false) : constant_step_ns_) +
      account_swaps(out);
  new_work_ = false;
  on_step(out, t_);
  log_row(out, t_, dt);
  advance_clock(dt);
  sched_.update_from_output();
  const bool finished_any = after_update(out);
  // Thrash guard: only recomputation (no new position, nothing finished) counts as no progress.
  if (new_work_ || finished_any) {
    idle_steps_ = 0;
  } else if (++idle_steps_ >= livelock_limit_) {
    livelock(idle_steps_);
  }
  if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
}

// vLLM EngineCore.step_with_batch_queue() with AsyncScheduler (engine_core.h): batch k+1 is
// scheduled before batch k is processed. Each queued batch keeps its end time; the GPU runs them
// back to back (see the clock rules in replay.h).
void ReplicaEngine::step_async() {
  ReplaySummary& sum = summary_;
  // Nothing running when schedule() runs (it is the step's first call): no request holds a block
  // or a seat, since a request stays in running until the update that finishes it. Read before
  // core_.step(), which may process a batch after scheduling: the requests finished there held
  // their blocks when schedule() ran, and vLLM admits the head on the next step.
  const bool empty_before = sched_.num_running() == 0;
  const EngineStep st = core_.step();
  bool progress = false;
  bool stalled = false;  // scheduled nothing in an empty engine: the head can never be admitted
  if (st.scheduled != nullptr) {
    const SchedulerOutput& out = *st.scheduled;
    for (int64_t id : out.aborted_req_ids) {
      reject(static_cast<size_t>(id), RejectReason::OUTGREW_POOL);
    }
    const int64_t start = std::max(t_, gpu_free_ns_);
    int64_t dt = 0;
    new_work_ = false;
    if (out.total_num_scheduled_tokens > 0) {
      // Local sums: accumulating into members would be a chain of loads and stores through
      // memory, one per scheduled request.
      // A constant step time (StepTimeModel::constant_step_ns) needs no account of the work.
      const bool timed = constant_step_ns_ < 0;
      StepWork work;
      int64_t ahead_tokens = 0;
      int64_t ahead_blocks = 0;
      for (const ScheduledRequest& s : out.scheduled) {
        if (timed) work.add_sequence(s.num_computed_tokens, s.num_tokens, !s.is_decode);
        if (s.num_output_placeholders > 0) {
          ahead_tokens += s.num_tokens;
          ahead_blocks += s.new_blocks_count;
        }
      }
      // Implicit decodes, scheduled one token ahead.
      if (timed) add_implicit_decodes(work, out);
      ahead_tokens += out.implicit_decodes;
      ahead_blocks += out.implicit_new_blocks;
      sum.async_ahead_tokens += ahead_tokens;
      sum.async_ahead_blocks += ahead_blocks;
      execute_batch(out);
      // Async: the host schedules this batch while the GPU runs the previous one.
      dt = timed ? step_time_.step_time_ns(work, /*overlap_cpu=*/true) : constant_step_ns_;
      on_step(out, start);
      log_row(out, start, dt);
    } else if (!out.preempted_req_ids.empty() || !out.aborted_req_ids.empty()) {
      log_row(out, start, 0);
    }
    gpu_free_ns_ = batch_end(start, dt);
    end_ns_[batch_slot(out.step_index)] = gpu_free_ns_;
    progress = new_work_;
    stalled = empty_before && out.total_num_scheduled_tokens == 0 &&
              out.preempted_req_ids.empty() && sched_.num_running() == 0 && sched_.has_waiting();
  }
  if (st.processed != nullptr) {
    const SchedulerOutput& out = *st.processed;
    t_ = std::max(t_, end_ns_[batch_slot(out.step_index)]);
    for (const SchedulerOutput::Finished& f : out.finished_in_update) {
      sum.async_late_free_blocks += f.num_freed_blocks;
      sum.async_late_free_requests += 1;
    }
    progress = after_update(out) || progress;
  }
  if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
  if (stalled) {
    // As in sync mode: nothing held KV when schedule() ran and the head still did not fit.
    Request* head = sched_.abort_waiting_head();
    reject(static_cast<size_t>(head->request_id), RejectReason::NEVER_ADMITTABLE);
    idle_steps_ = 0;
    return;
  }
  if (progress) {
    idle_steps_ = 0;
  } else if (++idle_steps_ >= livelock_limit_) {
    livelock(idle_steps_);
  }
}

int32_t ReplicaEngine::cached_prefix_tokens(const Request& r) const {
  const SchedulerConfig& sc = sched_.config();
  if (!sc.enable_prefix_caching || r.hash_block_size != sc.block_size || r.num_tokens() <= 0) {
    return 0;
  }
  const KVCacheManager& kv = sched_.kv_cache_manager();
  if (const KVCacheCoordinator* coord = kv.coordinator(); coord != nullptr) {
    return static_cast<int32_t>(
        coord->find_longest_cache_hit(r.block_hashes, int64_t{r.num_tokens()} - 1, probe_scratch_));
  }
  // The single full-attention lookup of KVCacheManager::get_computed_blocks, without its record.
  const size_t max_blocks =
      std::min(static_cast<size_t>((r.num_tokens() - 1) / sc.block_size), r.block_hashes.size());
  size_t hits = 0;
  while (hits < max_blocks && kv.block_pool().get_cached_block(r.block_hashes[hits])) ++hits;
  return static_cast<int32_t>(hits) * sc.block_size;
}

void ReplicaEngine::finish() {
  // A run stopped early (cluster SLO early stop) leaves requests in flight: their counters and
  // records must show every token scheduled so far.
  sched_.drain_unreported_tokens([this](int64_t id, const Scheduler::UnreportedTokens& u) {
    add_unreported(static_cast<size_t>(id), u);
  });
  ReplaySummary& sum = summary_;
  sum.sim_ns = t_;
  if (!null_backend_) {
    sum.verification = backend_.verify();
    sum.backend_verified = true;
  }
  const KVCacheManager& kv = sched_.kv_cache_manager();
  if (const KVCacheCoordinator* coord = kv.coordinator(); coord != nullptr) {
    const KVCacheConfig& layout = sched_.config().kv_cache_config;
    sum.kv_cache_groups.clear();
    sum.window_blocks_freed = 0;
    for (size_t g = 0; g < coord->num_groups(); ++g) {
      KVCacheGroupSummary gs;
      const KVCacheSpec& spec = coord->manager(g).kv_cache_spec();
      gs.kind = std::string(to_string(spec.kind));
      gs.window = spec.kind == KVCacheSpecKind::kSlidingWindow ? spec.sliding_window
                                                               : spec.attention_chunk_size;
      gs.num_layers = static_cast<int32_t>(layout.kv_cache_groups[g].layer_indices.size());
      gs.blocks_freed_out_of_window = coord->manager(g).num_skipped_blocks_freed();
      sum.window_blocks_freed += gs.blocks_freed_out_of_window;
      sum.kv_cache_groups.push_back(std::move(gs));
    }
  }
  sum.prefix_cache = kv.prefix_cache_stats();
  sum.evictions = kv.block_pool().num_evictions();
  derive_replay_summary(sums_, sum);
  sum.latency = latency_.report();
}

}  // namespace kvsim
