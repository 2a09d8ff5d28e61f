// Shared by the sync (test_scheduler.cpp) and async (test_scheduler_async.cpp) scheduler golden
// tests: requests with explicit prompt tokens, and views of a step's output and the pool.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "kvsim/sim/sched/scheduler.h"

namespace kvsim::scheduler_test {

inline std::vector<BlockId> ids(std::span<const BlockId> s) {
  return {s.begin(), s.end()};
}

// A small single-group config: max_model_len and the token budget (1000) never bind.
inline SchedulerConfig small(int32_t num_blocks, int32_t block_size, bool caching) {
  SchedulerConfig c;
  c.num_gpu_blocks = num_blocks;
  c.block_size = block_size;
  c.enable_prefix_caching = caching;
  c.max_model_len = 1000;
  c.max_num_batched_tokens = 1000;
  c.max_num_seqs = 16;
  return c;
}

inline std::vector<int64_t> scheduled_ids(const SchedulerOutput& out) {
  std::vector<int64_t> v;
  for (const auto& x : out.scheduled) v.push_back(x.request_id);
  return v;
}

inline std::vector<int32_t> scheduled_tokens(const SchedulerOutput& out) {
  std::vector<int32_t> v;
  for (const auto& x : out.scheduled) v.push_back(x.num_tokens);
  return v;
}

// The block ids newly allocated to the i-th scheduled request of a step.
inline std::vector<BlockId> new_blocks(const SchedulerOutput& out, size_t i) {
  const ScheduledRequest& x = out.scheduled[i];
  return {out.new_block_ids.begin() + x.new_blocks_begin,
          out.new_block_ids.begin() + x.new_blocks_begin + x.new_blocks_count};
}

// Owns the scheduler and its requests (a deque keeps their addresses stable). The sync and async
// harnesses add how a step is driven.
struct SchedulerHarnessBase {
  explicit SchedulerHarnessBase(const SchedulerConfig& c) : s(c) {}
  // Adds a request whose prompt tokens are given (prefix caching compares them).
  Request& add(std::vector<int32_t> tokens, int32_t max_tokens, int32_t priority = 0,
               int64_t arrival_ns = 0) {
    Request& r = reqs.emplace_back();
    r.request_id = static_cast<int64_t>(reqs.size()) - 1;
    r.num_prompt_tokens = static_cast<int32_t>(tokens.size());
    r.max_tokens = max_tokens;
    r.priority = priority;
    r.arrival_time_ns = arrival_ns;
    r.content.token_ids = std::make_shared<const std::vector<int32_t>>(std::move(tokens));
    r.content.salt = static_cast<uint64_t>(r.request_id) + 1;
    s.add_request(&r);
    return r;
  }
  // A prompt of n tokens unique to this harness (base, base+1, ...).
  Request& add_unique(int32_t n, int32_t max_tokens, int32_t priority = 0, int64_t arrival = 0) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), next_token);
    next_token += n + 1000;
    return add(std::move(t), max_tokens, priority, arrival);
  }
  std::vector<BlockId> table(const Request& r) const {
    return ids(s.kv_cache_manager().get_block_ids(r.request_id));
  }
  std::vector<BlockId> free_queue() const {
    return s.kv_cache_manager().block_pool().free_block_queue().get_all_free_blocks();
  }

  Scheduler s;
  std::deque<Request> reqs;
  int32_t next_token = 1;
};

// Sync scheduling: one step is schedule() then update_from_output(); the KV manager's invariants
// are checked after every step.
struct SyncHarness : SchedulerHarnessBase {
  using SchedulerHarnessBase::SchedulerHarnessBase;
  const SchedulerOutput& step() {
    const SchedulerOutput& out = s.schedule();
    s.update_from_output();
    s.kv_cache_manager().check_invariants();
    return out;
  }
};

}  // namespace kvsim::scheduler_test
