#include "kvsim/sim/engine/replay.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kvsim/sim/engine/replica_engine.h"

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

ReplayResult run_replay(const ReplayConfig& config, const Trace& trace, KvBackend& backend,
                        const StepTimeModel& step_time, const ProgressCallback& progress) {
  check_replay_config(config, backend);
  const auto wall_start = std::chrono::steady_clock::now();
  ReplayRequests requests = make_replay_requests(trace);
  ReplicaEngine engine(config, backend, step_time, requests);
  engine.set_timeline_sink(config.timeline_sink);
  engine.reserve_requests(static_cast<int64_t>(requests.requests.size()));
  // The one-replica driver: every arrival goes to the engine before a step at or after it.
  const size_t n = requests.requests.size();
  const auto total = static_cast<int64_t>(n);
  size_t next = 0;
  int64_t next_progress = config.progress_every_steps;
  while (true) {
    const int64_t t = engine.next_event_ns();
    if (next < n && requests.requests[next].arrival_time_ns <= t) {
      engine.add_request(static_cast<int64_t>(next++));
      continue;
    }
    if (t == ReplicaEngine::kNoEvent) break;
    // Quiet steps back to back until the next request is due or a progress report.
    const int64_t before = next < n ? requests.requests[next].arrival_time_ns : INT64_MAX;
    const int64_t max_steps =
        progress ? std::max<int64_t>(next_progress - engine.num_steps(), 1) : INT64_MAX;
    if (engine.run_quiet_steps(before, max_steps) == 0) engine.step();
    if (progress && engine.num_steps() >= next_progress) {
      next_progress += config.progress_every_steps;
      progress(engine.num_done(), total, engine.clock_ns());
    }
  }
  engine.finish();
  if (progress) progress(engine.num_done(), total, engine.clock_ns());
  ReplayResult result;
  result.summary = std::move(engine.summary());
  result.timeline = std::move(engine.timeline());
  result.summary.request_slots = static_cast<int64_t>(n);
  if (config.record_requests) {
    if (config.request_sink != nullptr) {
      for (const RequestRecord& rec : requests.records) config.request_sink->add(rec);
    } else {
      result.requests = std::move(requests.records);
    }
  }
  result.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

namespace {

// Records handed to a sink in trace order (request_id 0, 1, ...) as they become final, in any
// order: a ring over the ids from next() on, grown by doubling when a record lands beyond it.
// A streamed replay finishes its requests roughly in arrival order, so the ring holds the few
// that finished before an earlier one did, not the trace.
// Invariant: every record put with an id below next() went to the sink, once, in id order; the
// slots for next() .. next() + capacity - 1 hold those put and not yet handed over (ready_).
class RecordsInTraceOrder {
 public:
  explicit RecordsInTraceOrder(RequestSink* sink) : sink_(sink) {}
  void put(const RequestRecord& r) {
    const int64_t id = r.request_id;
    if (id < next_) throw std::logic_error(fmt::format("request record {} put twice", id));
    while (static_cast<uint64_t>(id - next_) >= ring_.size()) grow();
    const size_t at = slot(id);
    if (ready_[at]) throw std::logic_error(fmt::format("request record {} put twice", id));
    ring_[at] = r;
    ready_[at] = 1;
    for (size_t k = slot(next_); ready_[k] != 0; k = slot(next_)) {
      sink_->add(ring_[k]);
      ready_[k] = 0;
      ++next_;
    }
  }
  int64_t next() const { return next_; }

 private:
  size_t slot(int64_t id) const { return static_cast<size_t>(id) & (ring_.size() - 1); }
  void grow() {
    const size_t size = ring_.empty() ? 64 : 2 * ring_.size();
    std::vector<RequestRecord> ring(size);
    std::vector<uint8_t> ready(size, 0);
    for (size_t k = 0; k < ring_.size(); ++k) {
      const int64_t id = next_ + static_cast<int64_t>(k);
      const size_t from = slot(id);
      if (ready_[from] == 0) continue;
      ring[static_cast<size_t>(id) & (size - 1)] = ring_[from];
      ready[static_cast<size_t>(id) & (size - 1)] = 1;
    }
    ring_.swap(ring);
    ready_.swap(ready);
  }

  RequestSink* sink_;
  std::vector<RequestRecord> ring_;  // size 0 or a power of two
  std::vector<uint8_t> ready_;
  int64_t next_ = 0;
};

}  // namespace

ReplayResult run_replay(const ReplayConfig& config, const TraceStream& trace, KvBackend& backend,
                        const StepTimeModel& step_time, const ProgressCallback& progress) {
  check_replay_config(config, backend);
  const auto wall_start = std::chrono::steady_clock::now();
  ReplayRequests slots;
  ReplicaEngine engine(config, backend, step_time, slots);
  engine.set_timeline_sink(config.timeline_sink);
  engine.reserve_requests(trace.num_requests());
  // Slots of requests that are done, with the scheduler's step count then: reusable once
  // Scheduler::id_reusable says no table, batch in flight or finished list names them.
  std::vector<int64_t> done_log;
  engine.set_done_log(&done_log);
  struct Retiring {
    int64_t slot;
    int64_t done_at;
  };
  std::deque<Retiring> retiring;
  std::vector<int64_t> free_slots;
  const int64_t total = trace.num_requests();
  // With record_requests, a request's record is final once its slot may be reused: it is copied
  // out, to its trace index, then, and every slot's last one at the end, so the records are the
  // whole-trace replay's (the slots' Request state is what streaming saves). A sink takes them
  // in trace order as they become final instead.
  std::vector<RequestRecord> records;
  RecordsInTraceOrder in_order(config.request_sink);
  if (config.record_requests && config.request_sink == nullptr) {
    records.resize(static_cast<size_t>(total));
  }
  const auto keep_record = [&](int64_t slot) {
    if (!config.record_requests) return;
    const RequestRecord& rec = slots.records[static_cast<size_t>(slot)];
    if (config.request_sink != nullptr) {
      in_order.put(rec);
    } else {
      records[static_cast<size_t>(rec.request_id)] = rec;
    }
  };
  int64_t next_progress = config.progress_every_steps;
  const auto step = [&](int64_t before_ns) {
    const int64_t max_steps =
        progress ? std::max<int64_t>(next_progress - engine.num_steps(), 1) : INT64_MAX;
    if (engine.run_quiet_steps(before_ns, max_steps) == 0) engine.step();
    const int64_t now = engine.scheduler().num_scheduled_steps();
    for (int64_t slot : done_log) retiring.push_back({slot, now});
    done_log.clear();
    while (!retiring.empty() && engine.scheduler().id_reusable(retiring.front().done_at)) {
      keep_record(retiring.front().slot);
      free_slots.push_back(retiring.front().slot);
      retiring.pop_front();
    }
    if (progress && engine.num_steps() >= next_progress) {
      next_progress += config.progress_every_steps;
      progress(engine.num_done(), total, engine.clock_ns());
    }
  };
  // run_replay's loop with arrivals pushed: a request is added once the engine's next event is
  // at or after its arrival, after every step due before it.
  int64_t index = 0;
  int64_t previous_arrival_ns = 0;
  trace.for_each([&](TraceRequest&& tr) {
    check_arrival(trace.header().path, index, tr, previous_arrival_ns);
    previous_arrival_ns = tr.arrival_ns;
    while (engine.next_event_ns() < tr.arrival_ns) step(tr.arrival_ns);
    int64_t slot = 0;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = static_cast<int64_t>(slots.requests.size());
      slots.requests.emplace_back();
      slots.records.emplace_back();
    }
    Request& r = slots.requests[static_cast<size_t>(slot)];
    r = make_request(tr, index);  // the salt stays the trace index's
    r.request_id = slot;
    r.external_id = index;
    slots.records[static_cast<size_t>(slot)] = make_request_record(tr, r, index);
    engine.add_request(slot);
    ++index;
  });
  while (engine.next_event_ns() != ReplicaEngine::kNoEvent) step(INT64_MAX);
  engine.finish();
  if (progress) progress(engine.num_done(), total, engine.clock_ns());
  // Every slot's last record, but those of the free slots: kept when they were freed.
  std::vector<uint8_t> kept(slots.records.size(), 0);
  for (const int64_t slot : free_slots) kept[static_cast<size_t>(slot)] = 1;
  for (size_t slot = 0; slot < slots.records.size(); ++slot) {
    if (kept[slot] == 0) keep_record(static_cast<int64_t>(slot));
  }
  if (config.record_requests && config.request_sink != nullptr && in_order.next() != total) {
    throw std::logic_error(fmt::format("streamed replay: {} of {} request records reached the sink",
                                       in_order.next(), total));
  }
  ReplayResult result;
  result.summary = std::move(engine.summary());
  result.timeline = std::move(engine.timeline());
  result.summary.request_slots = static_cast<int64_t>(slots.requests.size());
  if (config.record_requests && config.request_sink == nullptr)
    result.requests = std::move(records);
  result.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace kvsim
