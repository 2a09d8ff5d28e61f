// Golden tests of the async scheduling clone: vLLM 0.26's AsyncScheduler driven by
// EngineCore.step_with_batch_queue (batch queue of 2). Every expected value is derived by hand in
// the comments from the wheel's code:
//   * scheduler.py schedule(): RUNNING loop skip `placeholders > 0 and C + 2 - placeholders >=
//     prompt + max_tokens`; n = num_tokens + placeholders - C;
//   * _update_after_schedule: C += n; is_prefill_chunk = C < num_tokens + placeholders;
//     AsyncScheduler adds one placeholder to every scheduled request that is not a prefill chunk;
//   * update_from_output (oldest batch): a token for each non-chunk request that is not finished;
//     placeholders -= 1; cache_blocks(C - placeholders) if it was RUNNING; stop -> free (a
//     preempted request that stops is removed from waiting);
//   * core.py step_with_batch_queue: schedule and return while the queue has room and the batch
//     ran a token (or requests remain); otherwise process the oldest batch.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kvsim/sim/engine/engine_core.h"
#include "kvsim/sim/sched/scheduler.h"
#include "scheduler_harness.h"

namespace kvsim {
namespace {

using namespace scheduler_test;

// Async scheduling: one step is one EngineCore::step() (vLLM's step_with_batch_queue).
struct AsyncHarness : SchedulerHarnessBase {
  explicit AsyncHarness(SchedulerConfig c)
      : SchedulerHarnessBase((c.async_scheduling = true, c)), engine(s) {}
  EngineStep step() {
    const EngineStep st = engine.step();
    s.kv_cache_manager().check_invariants();
    return st;
  }
  EngineCore engine;
};

// The free-order example (KVCacheManager.free; bs=4, N=10, caching on, FCFS) under async
// scheduling. Sync gives
// R3 the blocks [3, 5] in its step 3 (test_scheduler.cpp); async gives [5, 6], because R2's slot
// for its in-flight token takes block 3 one step earlier, and R1 is freed one step later.
TEST(AsyncSchedulerGolden, Spec41WorkedIllustration) {
  AsyncHarness h(small(10, 4, true));
  Request& r1 = h.add({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2);
  Request& r2 = h.add({0, 1, 2, 3, 4, 5, 6, 7, 100, 101}, 10);

  // Call 1: schedule(0) exactly as sync: R1 gets [1,2,3] (blocks 1,2 hashed), R2 hits 8 tokens
  // ([1,2]) and gets block 4. Both are no longer prefill chunks (C = 10 = num_tokens), so each
  // gets a placeholder. The queue holds 1 < 2 batches and the batch ran tokens: no processing.
  const EngineStep s1 = h.step();
  ASSERT_NE(s1.scheduled, nullptr);
  EXPECT_EQ(s1.processed, nullptr);
  const SchedulerOutput& o0 = *s1.scheduled;
  EXPECT_EQ(scheduled_ids(o0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(scheduled_tokens(o0), (std::vector<int32_t>{10, 2}));
  EXPECT_FALSE(o0.scheduled[0].is_prefill_chunk);
  EXPECT_EQ(h.table(r1), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(h.table(r2), (std::vector<BlockId>{1, 2, 4}));
  EXPECT_EQ(r1.num_output_placeholders, 1);
  EXPECT_EQ(r2.num_output_placeholders, 1);
  EXPECT_EQ(r1.num_output_tokens, 0);

  // Call 2: schedule(1) before batch 0's tokens exist. R1: skip test 10 + 2 - 1 = 11 < 10 + 2,
  // n = 10 + 1 - 10 = 1 (position 10, its first token still in flight): 11 slots fit its 3
  // blocks, nothing new. R2 the same. Both decodes, placeholders 2. The queue is full, so batch 0
  // is processed: each gets its first token (placeholders back to 1), nobody stops.
  const EngineStep s2 = h.step();
  ASSERT_NE(s2.scheduled, nullptr);
  ASSERT_NE(s2.processed, nullptr);
  EXPECT_EQ(s2.processed->step_index, 0);
  const SchedulerOutput& o1 = *s2.scheduled;
  EXPECT_EQ(o1.step_index, 1);
  EXPECT_EQ(scheduled_tokens(o1), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(o1.scheduled[0].num_computed_tokens, 10);
  EXPECT_TRUE(o1.scheduled[0].is_decode);
  EXPECT_EQ(o1.scheduled[0].num_output_placeholders, 1);  // scheduled one token ahead
  EXPECT_TRUE(o1.new_block_ids.empty());
  EXPECT_TRUE(s2.processed->scheduled[0].sampled);
  EXPECT_EQ(r1.num_output_tokens, 1);
  EXPECT_EQ(r1.num_output_placeholders, 1);
  EXPECT_EQ(r1.num_computed_tokens, 11);

  // Call 3: schedule(2). R1: 11 + 2 - 1 = 12 >= 10 + 2 -> skipped (batch 1 brings its last
  // token). R2: n = 11 + 1 - 11 = 1 at position 11; 12 slots fit 3 blocks. Then batch 1 is
  // processed: R1's second token stops it (max_tokens 2) and frees reversed [3,2,1]: only block
  // 3 reaches ref 0 and, unhashed, goes to the front of the free queue.
  const EngineStep s3 = h.step();
  const SchedulerOutput& o2 = *s3.scheduled;
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{1}));
  ASSERT_NE(s3.processed, nullptr);
  EXPECT_EQ(s3.processed->step_index, 1);
  EXPECT_TRUE(s3.processed->scheduled[0].finished);
  EXPECT_EQ(s3.processed->scheduled[0].num_freed_blocks, 3);
  EXPECT_EQ(r1.status, RequestStatus::FINISHED_LENGTH_CAPPED);
  EXPECT_EQ(r1.num_output_tokens, 2);
  EXPECT_EQ(r1.num_output_placeholders, 0);
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{3, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(o2.finished_req_ids.empty());  // R1 is reported by the next schedule()

  // Call 4: a new 5-token R3 arrives. schedule(3): R1 reported finished. R2 (2 tokens out,
  // 1 placeholder, C = 12): n = 1 at position 12 needs 13 slots = 4 blocks: block 3 from the
  // front of the free queue (sync allocates it one step later, to R3). Its 3rd block (tokens
  // 8..11) becomes full within min(13, num_tokens 12) and is hashed. R3 misses and takes [5, 6].
  Request& r3 = h.add_unique(5, 4);
  const EngineStep s4 = h.step();
  const SchedulerOutput& o3 = *s4.scheduled;
  EXPECT_EQ(o3.finished_req_ids, (std::vector<int64_t>{0}));
  EXPECT_EQ(scheduled_ids(o3), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(new_blocks(o3, 0), (std::vector<BlockId>{3}));
  EXPECT_EQ(h.table(r2), (std::vector<BlockId>{1, 2, 4, 3}));
  EXPECT_EQ(h.table(r3), (std::vector<BlockId>{5, 6}));
  EXPECT_TRUE(o3.scheduled[1].is_new);
  EXPECT_TRUE(h.s.kv_cache_manager().block_pool().is_cached(4));
  EXPECT_EQ(r3.num_output_placeholders, 1);  // whole prompt scheduled: not a prefill chunk
  ASSERT_NE(s4.processed, nullptr);
  EXPECT_EQ(s4.processed->step_index, 2);
  EXPECT_EQ(r2.num_output_tokens, 3);
}

// A decode preempted while its token is in flight still receives that token at the update, then
// is re-admitted with it; a prefill chunk gets no placeholder. bs=4, N=4 (3 usable blocks),
// caching off, FCFS, full-sequence gate on.
TEST(AsyncSchedulerGolden, PreemptedWithTokenInFlight) {
  AsyncHarness h(small(4, 4, false));
  Request& a = h.add_unique(3, 4);
  Request& b = h.add_unique(3, 10);
  // schedule(0): A [1], B [2], 3 tokens each, one placeholder each.
  h.step();
  EXPECT_EQ(h.table(a), (std::vector<BlockId>{1}));
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2}));
  // schedule(1): A and B at position 3 (4 slots, 1 block each: nothing new); process batch 0.
  const EngineStep s2 = h.step();
  EXPECT_EQ(scheduled_tokens(*s2.scheduled), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(a.num_output_tokens, 1);
  EXPECT_EQ(b.num_output_placeholders, 1);
  // schedule(2): A at position 4 needs 5 slots = 2 blocks: takes block 3, the last free one.
  // B needs a 2nd block too: none free, so FCFS pops B itself (placeholder kept: its token from
  // batch 1 is in flight). Then batch 1 is processed: B, now PREEMPTED, still gets token 2.
  const EngineStep s3 = h.step();
  const SchedulerOutput& o2 = *s3.scheduled;
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{0}));
  EXPECT_EQ(new_blocks(o2, 0), (std::vector<BlockId>{3}));
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(o2.admission_stop, AdmissionStop::PREEMPTED);
  EXPECT_EQ(b.status, RequestStatus::PREEMPTED);
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(b.num_output_tokens, 2);  // batch 1's token arrived after the preemption
  EXPECT_EQ(b.num_output_placeholders, 0);
  EXPECT_TRUE(s3.processed->scheduled[1].sampled);
  // schedule(3): A at position 5 (6 slots in its 2 blocks). B (5 tokens) needs 2 blocks with
  // the gate; 1 is free: head-of-line blocked. Batch 2 processed: A has 3 tokens.
  const EngineStep s4 = h.step();
  EXPECT_EQ(scheduled_ids(*s4.scheduled), (std::vector<int64_t>{0}));
  EXPECT_EQ(s4.scheduled->admission_stop, AdmissionStop::KV_CACHE);
  EXPECT_EQ(a.num_output_tokens, 3);
  // schedule(4): A: 6 + 2 - 1 = 7 >= 3 + 4: skipped (batch 3 brings its 4th token); B still
  // blocked: an empty batch, so the queue is full and batch 3 is processed: A stops and frees
  // reversed [1,3] (both unhashed: prepended, so the queue reads 3, 1, 2).
  const EngineStep s5 = h.step();
  EXPECT_EQ(s5.scheduled->total_num_scheduled_tokens, 0);
  ASSERT_NE(s5.processed, nullptr);
  EXPECT_EQ(s5.processed->step_index, 3);
  EXPECT_TRUE(s5.processed->scheduled[0].finished);
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{3, 1, 2}));
  // schedule(5): A reported; B resumed with all 5 tokens (prompt + 2 generated) in blocks [3, 1].
  // The empty batch 4 is processed (the queue is full again).
  const EngineStep s6 = h.step();
  const SchedulerOutput& o5 = *s6.scheduled;
  EXPECT_EQ(o5.finished_req_ids, (std::vector<int64_t>{0}));
  ASSERT_EQ(scheduled_ids(o5), (std::vector<int64_t>{1}));
  EXPECT_TRUE(o5.scheduled[0].is_resumed);
  EXPECT_EQ(o5.scheduled[0].num_tokens, 5);
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{3, 1}));
  EXPECT_EQ(b.num_output_placeholders, 1);
  EXPECT_EQ(s6.processed->step_index, 4);
}

// A request preempted while its LAST token is in flight finishes in the waiting queue at the
// update, which drops it from there (vLLM stopped_preempted_reqs). bs=4, N=4, caching off.
TEST(AsyncSchedulerGolden, StoppedWhilePreemptedLeavesWaiting) {
  AsyncHarness h(small(4, 4, false));
  Request& a = h.add_unique(3, 10);
  Request& b = h.add_unique(4, 2);
  // schedule(0): A [1] (3 tokens), B [2] (4 tokens), one placeholder each; block 3 free.
  h.step();
  // schedule(1): A at position 3 (4 slots: its one block). B: 4 + 2 - 1 = 5 < 4 + 2, so at
  // position 4 (5 slots = 2 blocks): takes block 3. Batch 0 processed: one token each.
  const EngineStep s2 = h.step();
  EXPECT_EQ(new_blocks(*s2.scheduled, 1), (std::vector<BlockId>{3}));
  EXPECT_EQ(b.num_output_tokens, 1);
  // schedule(2): A at position 4 needs a 2nd block and none is free: FCFS pops B (batch 1
  // carries its 2nd and last token) and frees reversed [2, 3], prepended as 3, 2; A takes 3.
  // Batch 1 processed: B, PREEMPTED, gets its last token, stops and leaves the waiting queue.
  const EngineStep s3 = h.step();
  EXPECT_EQ(s3.scheduled->preempted_req_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(h.table(a), (std::vector<BlockId>{1, 3}));
  ASSERT_NE(s3.processed, nullptr);
  EXPECT_EQ(s3.processed->step_index, 1);
  EXPECT_TRUE(s3.processed->scheduled[1].finished);
  EXPECT_EQ(b.status, RequestStatus::FINISHED_LENGTH_CAPPED);
  EXPECT_EQ(b.num_output_tokens, 2);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(h.s.num_waiting(), 0u);
  EXPECT_EQ(h.s.num_running(), 1u);
  // The next schedule() reports B among the finished.
  const EngineStep s4 = h.step();
  EXPECT_EQ(s4.scheduled->finished_req_ids, (std::vector<int64_t>{1}));
}

TEST(AsyncScheduler, RefusesSwapAndAThirdBatch) {
  SchedulerConfig c = small(8, 4, false);
  c.async_scheduling = true;
  c.preemption_mode = PreemptionMode::SWAP;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.preemption_mode = PreemptionMode::RECOMPUTE;
  Scheduler s(c);
  Request r;
  r.num_prompt_tokens = 4;
  r.max_tokens = 8;
  s.add_request(&r);
  s.schedule();
  s.schedule();
  EXPECT_EQ(s.num_pending_outputs(), 2);
  EXPECT_THROW(s.schedule(), std::logic_error);
  s.update_from_output();
  s.update_from_output();
  EXPECT_THROW(s.update_from_output(), std::logic_error);
}

}  // namespace
}  // namespace kvsim
