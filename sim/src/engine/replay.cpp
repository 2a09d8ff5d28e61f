#include "kvsim/sim/engine/replay.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

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
    engine.step();
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
  if (config.record_requests) result.requests = std::move(requests.records);
  result.summary.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace kvsim
