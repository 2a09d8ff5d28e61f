// Async scheduling (vLLM's default) must admit every request vLLM's AsyncScheduler admits.
// kvsim aborts a waiting head as never_admittable only when the engine is truly empty (nothing
// running, no batch in flight, so no request holds a block or a seat) and the head still does
// not fit. In async mode the requests of the processed batch free their blocks one step after
// the schedule() that could not admit the head; that is not an empty engine (issue 23 part 1).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"
#include "random_trace.h"

namespace kvsim {
namespace {

Trace all_at_once(int n, int32_t in, int32_t out) {
  Trace t;
  for (int i = 0; i < n; ++i) {
    TraceRequest r;
    r.arrival_ns = 0;
    r.input_tokens = in;
    r.output_tokens = out;
    t.requests.push_back(r);
  }
  return t;
}

// With invariant checks (the general scheduling path) and without (the lazy steady-decode path
// every plain async replay takes); both must agree.
ReplayResult replay_admission(ReplayConfig c, const Trace& t, bool async) {
  c.scheduler.async_scheduling = async;
  FixedStepTime step(10.0);
  NullKvBackend null;
  c.check_invariants = true;
  ReplayResult checked = run_replay(c, t, null, step);
  c.check_invariants = false;
  const ReplayResult fast = run_replay(c, t, null, step);
  EXPECT_EQ(checked.summary.finished, fast.summary.finished);
  EXPECT_EQ(checked.summary.rejected, fast.summary.rejected);
  return checked;
}

int64_t never_admittable(const ReplayResult& r) {
  return r.summary.rejected_by_reason[static_cast<size_t>(RejectReason::NEVER_ADMITTABLE)];
}

// 300 requests of 1000 prompt tokens and 1 output token at t = 0; 6400 usable blocks hold 101 of
// them (63 blocks each). Each round's batch finishes in the update after the next schedule(),
// which admits nothing; the old rule rejected the head there (298 finished, 2 rejected).
TEST(AsyncAdmission, PoolFullOfFinishingRequests) {
  ReplayConfig c;
  c.scheduler.block_size = 16;
  c.scheduler.num_gpu_blocks = 6401;
  c.scheduler.max_model_len = 1002;
  c.scheduler.max_num_seqs = 100000;
  c.scheduler.max_num_batched_tokens = 100000000;
  c.scheduler.enable_prefix_caching = false;
  const Trace t = all_at_once(300, 1000, 1);
  for (bool async : {false, true}) {
    const ReplayResult r = replay_admission(c, t, async);
    EXPECT_EQ(r.summary.finished, 300) << (async ? "async" : "sync");
    EXPECT_EQ(r.summary.rejected, 0) << (async ? "async" : "sync");
  }
}

// A single seat: the seat's request finishes in the update after the schedule() that could not
// admit the next one (the old rule rejected every second request).
TEST(AsyncAdmission, SingleSeat) {
  ReplayConfig c;
  c.scheduler.block_size = 16;
  c.scheduler.num_gpu_blocks = 1000;
  c.scheduler.max_model_len = 4096;
  c.scheduler.max_num_seqs = 1;
  c.scheduler.max_num_batched_tokens = 2048;
  Trace t;
  std::mt19937_64 rng(7);
  int64_t at = 0;
  for (int i = 0; i < 200; ++i) {
    TraceRequest r;
    at += std::uniform_int_distribution<int64_t>(0, 30'000'000)(rng);
    r.arrival_ns = at;
    r.input_tokens = std::uniform_int_distribution<int32_t>(1, 900)(rng);
    r.output_tokens = std::uniform_int_distribution<int32_t>(1, 40)(rng);
    t.requests.push_back(r);
  }
  const ReplayResult r = replay_admission(c, t, true);
  EXPECT_EQ(r.summary.finished, 200);
  EXPECT_EQ(never_admittable(r), 0);
}

// 257 tiny requests at once with max_num_seqs 256: the 257th waits for a seat (the old rule
// rejected it).
TEST(AsyncAdmission, TinyRequestsAllAtOnce) {
  ReplayConfig c;
  c.scheduler.block_size = 16;
  c.scheduler.num_gpu_blocks = 4000;
  c.scheduler.max_model_len = 64;
  c.scheduler.max_num_seqs = 256;
  c.scheduler.max_num_batched_tokens = 8192;
  const ReplayResult r = replay_admission(c, all_at_once(257, 8, 1), true);
  EXPECT_EQ(r.summary.finished, 257);
  EXPECT_EQ(r.summary.rejected, 0);
}

// The rule still fires where it must: a request that cannot fit an empty pool (with the
// full-sequence gate: 17 + 40 tokens need 15 blocks of 4, 9 usable) is aborted in both modes,
// and the requests behind it still finish.
TEST(AsyncAdmission, NeverAdmittableStillRejectedInAnEmptyEngine) {
  ReplayConfig c;
  c.scheduler.block_size = 4;
  c.scheduler.num_gpu_blocks = 10;
  c.scheduler.max_model_len = 100;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = 64;
  Trace t = all_at_once(3, 4, 2);
  t.requests[1].input_tokens = 17;
  t.requests[1].output_tokens = 40;
  for (bool async : {false, true}) {
    const ReplayResult r = replay_admission(c, t, async);
    EXPECT_EQ(r.summary.finished, 2) << async;
    EXPECT_EQ(never_admittable(r), 1) << async;
    EXPECT_TRUE(r.requests[1].rejected) << async;
  }
}

// Differential: whether a request can be admitted does not depend on the engine loop, so every
// request that finishes in one mode finishes in the other, and requests refused at arrival are
// the same set.
TEST(AsyncAdmission, SyncAndAsyncFinishTheSameRequests) {
  int64_t compared = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL);
    const ReplayConfig c = test::random_small_config(rng);
    const Trace t = test::random_trace(rng, test::DrawOrder::kInputFirst);
    const ReplayResult s = replay_admission(c, t, false);
    const ReplayResult a = replay_admission(c, t, true);
    ASSERT_EQ(s.requests.size(), a.requests.size());
    for (size_t i = 0; i < s.requests.size(); ++i) {
      const RequestRecord& x = s.requests[i];
      const RequestRecord& y = a.requests[i];
      EXPECT_EQ(x.finished, y.finished)
          << "seed " << seed << " request " << i << ": sync "
          << (x.finished ? "finished" : std::string(to_string(x.reject_reason))) << ", async "
          << (y.finished ? "finished" : std::string(to_string(y.reject_reason)));
      if (x.first_scheduled_ns < 0 || y.first_scheduled_ns < 0) {
        EXPECT_EQ(x.rejected, y.rejected) << "seed " << seed << " request " << i;
        if (x.rejected && y.rejected) {
          EXPECT_EQ(x.reject_reason, y.reject_reason) << "seed " << seed << " request " << i;
        }
      }
      ++compared;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(compared, 3000);
}

}  // namespace
}  // namespace kvsim
