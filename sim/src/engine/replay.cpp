#include "kvsim/sim/engine/replay.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "kvsim/sim/engine/engine_core.h"
#include "replay_batch.h"

namespace kvsim {

Request make_request(const TraceRequest& t, int64_t request_id) {
  Request r;
  r.request_id = request_id;
  r.num_prompt_tokens = t.input_tokens;
  r.max_tokens = std::max(1, t.output_tokens);
  r.priority = t.priority;
  r.arrival_time_ns = t.arrival_ns;
  if (t.prompt_token_ids) {
    r.content.token_ids = t.prompt_token_ids;
  } else if (t.hash_ids && t.hash_block_size > 0) {
    r.content.hash_ids = t.hash_ids;
    r.content.hash_ids_block_size = t.hash_block_size;
  }
  // Generated tokens (and content-free prompts) hash with a request-unique salt.
  r.content.salt = static_cast<uint64_t>(request_id) + 1;
  return r;
}

int32_t default_max_model_len(const Trace& trace) {
  int64_t longest = 0;
  for (const TraceRequest& t : trace.requests) {
    const int64_t length = static_cast<int64_t>(t.input_tokens) + t.output_tokens;
    if (length + 1 > INT32_MAX) {
      const TraceFieldNames names = trace_field_names(trace.format);
      throw TraceError(trace.path, t.source_line, fmt::format("{}+{}", names.input, names.output),
                       fmt::format("request of {} tokens; max_model_len (its length + 1) must fit "
                                   "in 2^31 - 1 tokens",
                                   length),
                       fmt::format("{}+{}", t.input_tokens, t.output_tokens));
    }
    longest = std::max(longest, length);
  }
  return static_cast<int32_t>(longest + 1);
}

namespace {

class Engine {
 public:
  Engine(const ReplayConfig& config, const Trace& trace, KvBackend& backend,
         const StepTimeModel& step_time, const ProgressCallback& progress)
      : config_(config),
        trace_(trace),
        backend_(backend),
        step_time_(step_time),
        progress_(progress),
        sched_(config.scheduler),
        null_backend_(dynamic_cast<NullKvBackend*>(&backend) != nullptr) {}

  ReplayResult run();

 private:
  void run_sync(size_t& next, int64_t livelock_limit);
  void run_async(size_t& next, int64_t livelock_limit);
  void report_progress();
  void arrive(size_t index);
  void reject(RequestRecord& rec, Request& r, RejectReason why);
  // t_ + dt, or std::runtime_error instead of signed overflow.
  void advance_clock(int64_t dt);
  // start + dt (overflow-checked) for a batch starting at `start`; adds dt to busy time.
  int64_t batch_end(int64_t start, int64_t dt);
  void on_step(const SchedulerOutput& out, int64_t start_ns);
  bool after_update(const SchedulerOutput& out);  // true when a request finished
  void log_row(const SchedulerOutput& out, int64_t start_ns, int64_t duration_ns);
  int64_t account_swaps(const SchedulerOutput& out);  // returns the transfer time (ns)
  void execute_batch(const SchedulerOutput& out);
  [[noreturn]] void livelock(int64_t steps) const;
  void finish_summary();
  // Distinct blocks held (ref > 0): the usable N - 1 minus the free ones (BlockPool I2).
  int32_t used_blocks() const {
    return sched_.config().num_gpu_blocks - 1 - sched_.kv_cache_manager().num_free_blocks();
  }

  const ReplayConfig& config_;
  const Trace& trace_;
  KvBackend& backend_;
  const StepTimeModel& step_time_;
  const ProgressCallback& progress_;
  Scheduler sched_;
  bool null_backend_;
  std::vector<Request> requests_;
  std::vector<RequestRecord> records_;
  ReplayResult result_;
  LatencyCollector latency_;
  StepWork work_;
  StepBatch batch_;
  int64_t t_ = 0;
  int64_t done_ = 0;  // finished + rejected
  // Running sums for the summary.
  double sum_padding_ = 0;
  double sum_padding_fraction_ = 0;
  int64_t padding_fraction_steps_ = 0;
  double sum_usage_ = 0;
  int64_t usage_steps_ = 0;
  // Hybrid layouts: per group, Σ over steps of usage and of padding (empty otherwise).
  std::vector<double> group_usage_sum_;
  std::vector<double> group_usage_peak_;
  std::vector<double> group_padding_sum_;
  int64_t sum_running_ = 0;
  bool new_work_ = false;  // the current step computes a position for the first time
  int64_t next_progress_ = 0;
};

void Engine::reject(RequestRecord& rec, Request& r, RejectReason why) {
  r.status = RequestStatus::FINISHED_ABORTED;
  r.block_hashes = {};
  rec.rejected = true;
  rec.reject_reason = why;
  rec.preemptions = r.num_preemptions;
  if (why == RejectReason::NEVER_ADMITTABLE || why == RejectReason::OUTGREW_POOL) {
    // Aborted at run time: what it generated before (vLLM reports those tokens) and when.
    rec.output_tokens = r.num_output_tokens;
    rec.finish_ns = t_;
  }
  ReplaySummary& s = result_.summary;
  s.rejected += 1;
  s.rejected_by_reason[static_cast<size_t>(why)] += 1;
  ++done_;
}

void Engine::arrive(size_t index) {
  Request& r = requests_[index];
  RejectReason why{};
  if (!sched_.check_new_request(r, &why)) {
    reject(records_[index], r, why);
    return;
  }
  sched_.add_request(&r);
}

void Engine::on_step(const SchedulerOutput& out, int64_t start_ns) {
  for (const ScheduledRequest& s : out.scheduled) {
    RequestRecord& rec = records_[static_cast<size_t>(s.request_id)];
    if (rec.first_scheduled_ns < 0) rec.first_scheduled_ns = start_ns;
    if ((s.is_new || s.is_resumed) && !s.is_swapped_in && sched_.config().enable_prefix_caching) {
      result_.summary.admission_prefix_query_tokens +=
          requests_[static_cast<size_t>(s.request_id)].num_tokens();
    }
    rec.scheduled_tokens += s.num_tokens;
    rec.prefix_hit_tokens += s.num_prefix_hit_tokens;
    const int32_t end = s.num_computed_tokens + s.num_tokens;
    const int32_t redo = std::min(end, rec.computed_high_water) - s.num_computed_tokens;
    if (redo > 0) rec.recomputed_tokens += redo;
    if (redo < s.num_tokens) new_work_ = true;
    rec.computed_high_water = std::max(rec.computed_high_water, end);
  }
  ReplaySummary& sum = result_.summary;
  sum.steps += 1;
  sum.scheduled_tokens += out.total_num_scheduled_tokens;
  sum.prefill_tokens += out.num_prefill_tokens;
  sum.decode_tokens += out.num_decode_tokens;

  const auto running = static_cast<int32_t>(sched_.num_running());
  if (static_cast<size_t>(running) >= sum.running_histogram.size()) {
    sum.running_histogram.resize(static_cast<size_t>(running) + 1, 0);
  }
  sum.running_histogram[static_cast<size_t>(running)] += 1;
  sum_running_ += running;
  sum.peak_running = std::max(sum.peak_running, running);

  const KVCacheManager& kv = sched_.kv_cache_manager();
  const int32_t used = used_blocks();
  const int64_t padding = kv.padding_tokens();
  sum_padding_ += static_cast<double>(padding);
  sum.padding_tokens_peak = std::max(sum.padding_tokens_peak, padding);
  if (used > 0) {
    sum_padding_fraction_ +=
        static_cast<double>(padding) / (static_cast<double>(used) * sched_.config().block_size);
    ++padding_fraction_steps_;
  }
  const double usage = kv.usage();
  sum.peak_kv_usage = std::max(sum.peak_kv_usage, usage);
  sum_usage_ += usage;
  ++usage_steps_;
  if (kv.coordinator() != nullptr) {
    const size_t groups = kv.num_kv_cache_groups();
    group_usage_sum_.resize(groups, 0.0);
    group_usage_peak_.resize(groups, 0.0);
    group_padding_sum_.resize(groups, 0.0);
    const double usable = std::max(1.0, static_cast<double>(sched_.config().num_gpu_blocks - 1));
    for (size_t g = 0; g < groups; ++g) {
      const double u = static_cast<double>(kv.num_held_blocks_in_group(g)) / usable;
      group_usage_sum_[g] += u;
      group_usage_peak_[g] = std::max(group_usage_peak_[g], u);
      group_padding_sum_[g] += static_cast<double>(kv.padding_tokens(g));
    }
  }
}

void Engine::log_row(const SchedulerOutput& out, int64_t start_ns, int64_t duration_ns) {
  ReplaySummary& sum = result_.summary;
  const auto preempted = static_cast<int32_t>(out.preempted_req_ids.size());
  sum.preemptions += preempted;
  if (sched_.num_waiting() > 0) {
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
  if (!config_.record_timeline) return;
  const KVCacheManager& kv = sched_.kv_cache_manager();
  TimelineRow row;
  row.step = out.step_index;
  row.time_ns = start_ns;
  row.duration_ns = duration_ns;
  row.running = static_cast<int32_t>(sched_.num_running());
  row.waiting = static_cast<int32_t>(sched_.num_waiting());
  row.scheduled_reqs = static_cast<int32_t>(out.scheduled.size());
  row.scheduled_tokens = out.total_num_scheduled_tokens;
  row.prefill_tokens = out.num_prefill_tokens;
  row.decode_tokens = out.num_decode_tokens;
  row.free_blocks = kv.num_free_blocks();
  row.used_blocks = used_blocks();
  row.cached_blocks = kv.block_pool().num_cached_blocks();
  row.padding_tokens = kv.padding_tokens();
  row.preemptions = preempted;
  row.admission_stop = out.admission_stop;
  row.swap_out_blocks = static_cast<int32_t>(out.swap_out.size());
  row.swap_in_blocks = static_cast<int32_t>(out.swap_in.size());
  row.host_slots_used = sched_.num_used_host_slots();
  result_.timeline.push_back(row);
}

void Engine::advance_clock(int64_t dt) {
  t_ = batch_end(t_, dt);
}

// Arrivals are <= kMaxArrivalNs and steps <= kMaxStepSeconds, so only an absurdly long run
// (~1.3 million one-hour steps) overflows; it must be an error, never a wrapped clock.
int64_t Engine::batch_end(int64_t start, int64_t dt) {
  ReplaySummary& sum = result_.summary;
  int64_t end = 0;
  int64_t busy = 0;
  if (__builtin_add_overflow(start, dt, &end) || __builtin_add_overflow(sum.busy_ns, dt, &busy)) {
    throw std::runtime_error(fmt::format(
        "simulated clock overflow at step {}: t = {} ns plus a step of {} ns leaves 64-bit "
        "nanoseconds (292 years); use a shorter --step-time or trace",
        sum.steps, start, dt));
  }
  sum.busy_ns = busy;
  return end;
}

int64_t Engine::account_swaps(const SchedulerOutput& out) {
  ReplaySummary& sum = result_.summary;
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

void Engine::execute_batch(const SchedulerOutput& out) {
  if (null_backend_) return;
  detail::build_step_batch(out, sched_.kv_cache_manager(), batch_);
  const StepExecution ex = backend_.execute(batch_);
  ReplaySummary& sum = result_.summary;
  sum.backend_device_seconds += ex.device_seconds;
  sum.backend_bytes_read += ex.bytes_read;
  sum.backend_bytes_written += ex.bytes_written;
}

bool Engine::after_update(const SchedulerOutput& out) {
  bool any = false;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.sampled) continue;
    const auto id = static_cast<size_t>(s.request_id);
    RequestRecord& rec = records_[id];
    if (rec.first_token_ns < 0) rec.first_token_ns = t_;
    if (!s.finished) continue;
    Request& r = requests_[id];
    rec.finish_ns = t_;
    rec.finished = true;
    rec.output_tokens = r.num_output_tokens;
    rec.preemptions = r.num_preemptions;
    r.block_hashes = {};  // release memory of finished requests
    latency_.add({rec.arrival_ns, rec.first_scheduled_ns, rec.first_token_ns, rec.finish_ns,
                  rec.output_tokens});
    result_.summary.finished += 1;
    result_.summary.generated_tokens += rec.output_tokens;
    ++done_;
    any = true;
  }
  return any;
}

void Engine::livelock(int64_t steps) const {
  const KVCacheManager& kv = sched_.kv_cache_manager();
  std::string head = "none";
  if (!sched_.waiting().empty()) {
    const Request* h = sched_.waiting().peek();
    head = fmt::format("request {} ({} tokens, {} computed)", h->request_id, h->num_tokens(),
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

void Engine::report_progress() {
  if (progress_ && result_.summary.steps >= next_progress_) {
    next_progress_ += config_.progress_every_steps;
    progress_(done_, static_cast<int64_t>(requests_.size()), t_);
  }
}

// vLLM EngineCore.step(): schedule, execute, update, strictly alternating.
void Engine::run_sync(size_t& next, int64_t livelock_limit) {
  const size_t n = requests_.size();
  int64_t idle_steps = 0;
  while (true) {
    while (next < n && requests_[next].arrival_time_ns <= t_) arrive(next++);
    if (!sched_.has_unfinished_requests()) {
      if (next >= n) break;
      t_ = requests_[next].arrival_time_ns;  // idle: jump, no step logged
      continue;
    }
    const SchedulerOutput& out = sched_.schedule();
    for (int64_t id : out.aborted_req_ids) {
      reject(records_[static_cast<size_t>(id)], requests_[static_cast<size_t>(id)],
             RejectReason::OUTGREW_POOL);
    }
    if (out.total_num_scheduled_tokens == 0) {
      // Only swap-outs of this step's victims can be pending: they still move data and time.
      const int64_t swap_dt = account_swaps(out);
      if (!out.swap_out.empty()) execute_batch(out);
      sched_.update_from_output();  // nothing to apply; keeps the schedule/update pairing
      if (!out.preempted_req_ids.empty() || !out.aborted_req_ids.empty()) log_row(out, t_, swap_dt);
      advance_clock(swap_dt);
      if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
      if (sched_.num_running() == 0 && out.preempted_req_ids.empty() && sched_.num_waiting() > 0) {
        Request* head = sched_.abort_waiting_head();
        reject(records_[static_cast<size_t>(head->request_id)], *head,
               RejectReason::NEVER_ADMITTABLE);
        idle_steps = 0;
        continue;
      }
      if (++idle_steps >= livelock_limit) livelock(idle_steps);
      continue;
    }
    work_.clear();
    for (const ScheduledRequest& s : out.scheduled) {
      work_.add_sequence(s.num_computed_tokens, s.num_tokens, !s.is_decode);
    }
    execute_batch(out);
    const int64_t dt = step_time_.step_time_ns(work_) + account_swaps(out);
    new_work_ = false;
    on_step(out, t_);
    log_row(out, t_, dt);
    advance_clock(dt);
    sched_.update_from_output();
    const bool finished_any = after_update(out);
    // Thrash guard: only recomputation (no new position, nothing finished) counts as no progress.
    if (new_work_ || finished_any) {
      idle_steps = 0;
    } else if (++idle_steps >= livelock_limit) {
      livelock(idle_steps);
    }
    if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
    report_progress();
  }
}

// vLLM EngineCore.step_with_batch_queue() with AsyncScheduler (engine_core.h): batch k+1 is
// scheduled before batch k is processed. Each queued batch keeps its end time; the GPU runs them
// back to back (see the clock rules in replay.h).
void Engine::run_async(size_t& next, int64_t livelock_limit) {
  const size_t n = requests_.size();
  EngineCore core(sched_);
  std::array<int64_t, 2> end_ns{};  // end time of each in-flight batch, by step_index % 2
  int64_t gpu_free_ns = 0;          // when the last scheduled batch ends
  int64_t idle_steps = 0;
  ReplaySummary& sum = result_.summary;
  while (true) {
    while (next < n && requests_[next].arrival_time_ns <= t_) arrive(next++);
    if (!core.has_work()) {
      if (next >= n) break;
      t_ = requests_[next].arrival_time_ns;  // idle: jump, no step logged
      continue;
    }
    const EngineStep st = core.step();
    bool progress = false;
    bool stalled = false;  // scheduled nothing while nothing runs: the head can never be admitted
    if (st.scheduled != nullptr) {
      const SchedulerOutput& out = *st.scheduled;
      for (int64_t id : out.aborted_req_ids) {
        reject(records_[static_cast<size_t>(id)], requests_[static_cast<size_t>(id)],
               RejectReason::OUTGREW_POOL);
      }
      const int64_t start = std::max(t_, gpu_free_ns);
      int64_t dt = 0;
      new_work_ = false;
      if (out.total_num_scheduled_tokens > 0) {
        work_.clear();
        for (const ScheduledRequest& s : out.scheduled) {
          work_.add_sequence(s.num_computed_tokens, s.num_tokens, !s.is_decode);
          if (s.num_output_placeholders > 0) {
            sum.async_ahead_tokens += s.num_tokens;
            sum.async_ahead_blocks += s.new_blocks_count;
          }
        }
        execute_batch(out);
        dt = step_time_.step_time_ns(work_);
        on_step(out, start);
        log_row(out, start, dt);
      } else if (!out.preempted_req_ids.empty() || !out.aborted_req_ids.empty()) {
        log_row(out, start, 0);
      }
      gpu_free_ns = batch_end(start, dt);
      end_ns[static_cast<size_t>(out.step_index % 2)] = gpu_free_ns;
      progress = new_work_;
      stalled = out.total_num_scheduled_tokens == 0 && out.preempted_req_ids.empty() &&
                sched_.num_running() == 0 && sched_.num_waiting() > 0;
    }
    if (st.processed != nullptr) {
      const SchedulerOutput& out = *st.processed;
      t_ = std::max(t_, end_ns[static_cast<size_t>(out.step_index % 2)]);
      for (const ScheduledRequest& s : out.scheduled) {
        if (!s.finished) continue;
        sum.async_late_free_blocks += s.num_freed_blocks;
        sum.async_late_free_requests += 1;
      }
      progress = after_update(out) || progress;
    }
    if (config_.check_invariants) sched_.kv_cache_manager().check_invariants();
    if (stalled) {
      // As in sync mode: nothing runs (so nothing holds KV) and the head still does not fit.
      Request* head = sched_.abort_waiting_head();
      reject(records_[static_cast<size_t>(head->request_id)], *head,
             RejectReason::NEVER_ADMITTABLE);
      idle_steps = 0;
      continue;
    }
    if (progress) {
      idle_steps = 0;
    } else if (++idle_steps >= livelock_limit) {
      livelock(idle_steps);
    }
    report_progress();
  }
}

ReplayResult Engine::run() {
  const auto wall_start = std::chrono::steady_clock::now();
  const size_t n = trace_.requests.size();
  requests_.reserve(n);
  records_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TraceRequest& tr = trace_.requests[i];
    if (tr.arrival_ns < 0 || tr.arrival_ns > kMaxArrivalNs) {
      throw std::invalid_argument(
          fmt::format("trace {}: arrival of request {} (line {}) is {} ns, outside [0, 2^62]",
                      trace_.path, i, tr.source_line, tr.arrival_ns));
    }
    if (i > 0 && tr.arrival_ns < trace_.requests[i - 1].arrival_ns) {
      throw std::invalid_argument(fmt::format(
          "trace {}: arrivals not sorted at request {} (line {})", trace_.path, i, tr.source_line));
    }
    requests_.push_back(make_request(tr, static_cast<int64_t>(i)));
    RequestRecord& rec = records_[i];
    rec.request_id = static_cast<int64_t>(i);
    rec.source_line = tr.source_line;
    rec.prompt_tokens = tr.input_tokens;
    rec.max_tokens = requests_.back().max_tokens;
    rec.priority = tr.priority;
    rec.arrival_ns = tr.arrival_ns;
  }
  latency_.reserve(n);
  ReplaySummary& sum = result_.summary;
  sum.requests = static_cast<int64_t>(n);
  sum.num_gpu_blocks = sched_.config().num_gpu_blocks;
  sum.block_size = sched_.config().block_size;
  sum.max_model_len = sched_.config().max_model_len;
  sum.backend = backend_.name();
  sum.step_time_model = step_time_.describe();
  sum.host_swap_slots = sched_.config().preemption_mode == PreemptionMode::SWAP
                            ? sched_.config().num_host_swap_slots
                            : 0;
  sum.swap_bytes_per_block = config_.swap_bytes_per_block;
  sum.swap_bandwidth_bytes_per_s = config_.swap_bandwidth_bytes_per_s;

  size_t next = 0;
  // Auto limit: recomputing what fits in the pool legitimately takes up to (N-1)*bs / budget
  // token-less steps (a preempted 100k-token prompt under a small budget); only well beyond that
  // is it a livelock.
  const SchedulerConfig& sc = sched_.config();
  const int64_t livelock_limit =
      config_.livelock_steps > 0 ? config_.livelock_steps
                                 : 10000 + 2 * cdiv(int64_t{sc.num_gpu_blocks - 1} * sc.block_size,
                                                    std::max(sc.max_num_batched_tokens, 1));
  next_progress_ = config_.progress_every_steps;
  sum.async_scheduling = sc.async_scheduling;
  if (sc.async_scheduling) {
    run_async(next, livelock_limit);
  } else {
    run_sync(next, livelock_limit);
  }
  sum.sim_ns = t_;
  if (!null_backend_) {
    sum.verification = backend_.verify();
    sum.backend_verified = true;
  }
  finish_summary();
  if (progress_) progress_(done_, static_cast<int64_t>(n), t_);
  if (config_.record_requests) result_.requests = std::move(records_);
  sum.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(result_);
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

void Engine::finish_summary() {
  ReplaySummary& sum = result_.summary;
  const KVCacheManager& kv = sched_.kv_cache_manager();
  if (sum.steps > 0) {
    sum.mean_running = static_cast<double>(sum_running_) / static_cast<double>(sum.steps);
    sum.padding_tokens_mean = sum_padding_ / static_cast<double>(sum.steps);
  }
  if (padding_fraction_steps_ > 0) {
    sum.padding_fraction_mean =
        sum_padding_fraction_ / static_cast<double>(padding_fraction_steps_);
  }
  if (usage_steps_ > 0) sum.mean_kv_usage = sum_usage_ / static_cast<double>(usage_steps_);
  if (const KVCacheCoordinator* coord = kv.coordinator(); coord != nullptr) {
    const KVCacheConfig& layout = sched_.config().kv_cache_config;
    for (size_t g = 0; g < coord->num_groups(); ++g) {
      KVCacheGroupSummary gs;
      const KVCacheSpec& spec = coord->manager(g).kv_cache_spec();
      gs.kind = std::string(to_string(spec.kind));
      gs.window = spec.kind == KVCacheSpecKind::kSlidingWindow ? spec.sliding_window
                                                               : spec.attention_chunk_size;
      gs.num_layers = static_cast<int32_t>(layout.kv_cache_groups[g].layer_indices.size());
      if (g < group_usage_sum_.size() && usage_steps_ > 0) {
        gs.mean_kv_usage = group_usage_sum_[g] / static_cast<double>(usage_steps_);
        gs.peak_kv_usage = group_usage_peak_[g];
        gs.padding_tokens_mean = group_padding_sum_[g] / static_cast<double>(usage_steps_);
      }
      gs.blocks_freed_out_of_window = coord->manager(g).num_skipped_blocks_freed();
      sum.window_blocks_freed += gs.blocks_freed_out_of_window;
      sum.kv_cache_groups.push_back(std::move(gs));
    }
  }
  sum.p50_running = histogram_percentile(sum.running_histogram, sum.steps, 0.50);
  sum.p99_running = histogram_percentile(sum.running_histogram, sum.steps, 0.99);
  int64_t finished_length = 0;
  for (const RequestRecord& rec : records_) {
    if (rec.finished) finished_length += rec.prompt_tokens + rec.output_tokens;
    sum.recomputed_tokens += rec.recomputed_tokens;
    sum.prefix_hit_tokens += rec.prefix_hit_tokens;
    if (rec.preemptions > 0) sum.preempted_requests += 1;
  }
  if (sum.finished > 0) {
    sum.mean_finished_length =
        static_cast<double>(finished_length) / static_cast<double>(sum.finished);
  }
  sum.prefix_cache = kv.prefix_cache_stats();
  if (sum.prefix_cache.queries > 0) {
    sum.prefix_cache_hit_rate =
        static_cast<double>(sum.prefix_cache.hits) / static_cast<double>(sum.prefix_cache.queries);
  }
  if (sum.admission_prefix_query_tokens > 0) {
    sum.admission_prefix_hit_rate = static_cast<double>(sum.prefix_hit_tokens) /
                                    static_cast<double>(sum.admission_prefix_query_tokens);
  }
  sum.prefix_blocks_saved = sum.prefix_hit_tokens / sum.block_size;
  sum.evictions = kv.block_pool().num_evictions();
  sum.latency = latency_.report();
}

}  // namespace

ReplayResult run_replay(const ReplayConfig& config, const Trace& trace, KvBackend& backend,
                        const StepTimeModel& step_time, const ProgressCallback& progress) {
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
  const auto& groups = config.scheduler.kv_cache_config.kv_cache_groups;
  const bool hybrid =
      groups.size() > 1 ||
      (groups.size() == 1 && groups[0].kv_cache_spec.kind != KVCacheSpecKind::kFullAttention);
  if (hybrid && dynamic_cast<NullKvBackend*>(&backend) == nullptr) {
    throw std::invalid_argument(fmt::format(
        "replay: the {} KV backend models one full-attention group; this model's hybrid KV "
        "layout ({} groups) replays with the null backend only",
        backend.name(), groups.size()));
  }
  Engine engine(config, trace, backend, step_time, progress);
  return engine.run();
}

}  // namespace kvsim
