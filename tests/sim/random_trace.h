// A small random trace for the replay property tests (test_replay.cpp, test_replay_swap.cpp):
// up to 30 requests with bursty arrivals (a quarter arrive with the previous one), prompts of
// 0..80 tokens (0 exercises the empty-prompt rejection), outputs 0..40, priorities 0..2, and for
// about half of them a prompt whose leading tokens come from one shared pool of 200 tokens over a
// 4-token alphabet, so prefix caching finds partial hits of every length.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::test {

// Which length is drawn first. Each property test keeps the order its seeds were first run with;
// the other order is a different (and still valid) set of cases.
enum class DrawOrder : uint8_t { kOutputFirst, kInputFirst };

inline Trace random_trace(std::mt19937_64& rng, DrawOrder order) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Trace t;
  const int n = uni(1, 30);
  int64_t at = 0;
  auto shared = std::make_shared<std::vector<int32_t>>();
  for (int i = 0; i < 200; ++i) shared->push_back(uni(0, 3));
  for (int i = 0; i < n; ++i) {
    at += uni(0, 3) == 0 ? 0 : uni(1, 20'000'000);
    TraceRequest r;
    r.arrival_ns = at;
    if (order == DrawOrder::kOutputFirst) {
      r.output_tokens = uni(0, 40);
      r.input_tokens = uni(0, 80);
    } else {
      r.input_tokens = uni(0, 80);
      r.output_tokens = uni(0, 40);
    }
    r.priority = uni(0, 2);
    if (uni(0, 1) == 1 && r.input_tokens > 0) {
      // A prefix shared with other requests: tokens from the shared pool, then a private tail.
      auto toks = std::make_shared<std::vector<int32_t>>(
          shared->begin(), shared->begin() + std::min(r.input_tokens, uni(0, r.input_tokens)));
      while (static_cast<int32_t>(toks->size()) < r.input_tokens) toks->push_back(uni(0, 3));
      r.prompt_token_ids = toks;
    }
    t.requests.push_back(r);
  }
  return t;
}

// A small random replay configuration for the same property tests: block size 1..16, 2..40
// blocks, 1..8 seats, a budget of 8..64 tokens, caching, chunked prefill, policy, watermark,
// the full-sequence gate, a long-prefill threshold and lookahead tokens each drawn (the draw
// order is fixed: the seeds of test_replay.cpp depend on it).
inline ReplayConfig random_small_config(std::mt19937_64& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ReplayConfig c;
  const int bs_choices[] = {1, 2, 4, 16};
  c.scheduler.block_size = bs_choices[uni(0, 3)];
  c.scheduler.max_model_len = uni(8, 96);
  c.scheduler.num_gpu_blocks = uni(2, 40);
  c.scheduler.max_num_seqs = uni(1, 8);
  c.scheduler.max_num_batched_tokens = uni(std::max(8, c.scheduler.max_num_seqs), 64);
  c.scheduler.enable_prefix_caching = uni(0, 1) == 1;
  c.scheduler.enable_chunked_prefill = uni(0, 3) != 0;
  if (!c.scheduler.enable_chunked_prefill) {
    c.scheduler.max_num_batched_tokens =
        std::max(c.scheduler.max_num_batched_tokens, c.scheduler.max_model_len);
  }
  c.scheduler.policy = uni(0, 1) ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
  c.scheduler.watermark = uni(0, 2) == 0 ? 0.1 : 0.0;
  c.scheduler.scheduler_reserve_full_isl = uni(0, 3) != 0;
  c.scheduler.long_prefill_token_threshold = uni(0, 2) == 0 ? uni(1, 16) : 0;
  c.scheduler.num_lookahead_tokens = uni(0, 4) == 0 ? uni(1, 3) : 0;
  c.check_invariants = true;
  c.livelock_steps = 1000;
  return c;
}

}  // namespace kvsim::test
