// Golden tests of the vLLM 0.26 Scheduler clone (vllm/v1/core/sched/scheduler.py
// Scheduler.schedule, _preempt_request, update_from_output; kv_cache_manager.py
// KVCacheManager.free). Every expected block id is derived by hand from vLLM's rules, stated in
// the comments next to it.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kvsim/sim/sched/scheduler.h"
#include "scheduler_harness.h"

namespace kvsim {
namespace {

using namespace scheduler_test;

using Harness = SyncHarness;

// The free-order example (KVCacheManager.free, BlockPool.free_blocks; caching on, bs=4, N=10,
// sync, FCFS).
TEST(SchedulerGolden, Spec41WorkedIllustration) {
  Harness h(small(10, 4, true));
  std::vector<int32_t> p1 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> p2 = {0, 1, 2, 3, 4, 5, 6, 7, 100, 101};
  Request& r1 = h.add(p1, 2);
  Request& r2 = h.add(p2, 10);
  const SchedulerOutput& o1 = h.step();
  ASSERT_EQ(scheduled_ids(o1), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(scheduled_tokens(o1), (std::vector<int32_t>{10, 2}));  // R2 hits 8 tokens
  EXPECT_EQ(o1.scheduled[1].num_prefix_hit_tokens, 8);
  EXPECT_EQ(h.table(r1), (std::vector<BlockId>{1, 2, 3}));
  EXPECT_EQ(h.table(r2), (std::vector<BlockId>{1, 2, 4}));
  EXPECT_EQ(h.s.kv_cache_manager().block_pool().ref_cnt(1), 2);
  // Step 2: both decode; R1 reaches max_tokens=2 and frees reversed [3,2,1]: 3 (unhashed) is
  // prepended, 2 and 1 drop to ref 1.
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(scheduled_tokens(o2), (std::vector<int32_t>{1, 1}));
  EXPECT_TRUE(o2.scheduled[0].finished);
  EXPECT_EQ(r1.status, RequestStatus::FINISHED_LENGTH_CAPPED);
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{3, 5, 6, 7, 8, 9}));
  // Step 3: a new 5-token request gets [3, 5] (main-May would give [5, 6]).
  Request& r3 = h.add_unique(5, 4);
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(o3.finished_req_ids, (std::vector<int64_t>{0}));
  EXPECT_EQ(h.table(r3), (std::vector<BlockId>{3, 5}));
  EXPECT_TRUE(o3.scheduled[1].is_new);
}

// FCFS: victims are popped from the back of running; each goes to the front of waiting, so the
// running order is preserved there; a self-preemption ends the RUNNING loop.
TEST(SchedulerGolden, FcfsVictimOrderAndWaitingFront) {
  SchedulerConfig c = small(6, 4, false);  // 5 usable blocks
  c.max_num_seqs = 4;
  Harness h(c);
  Request& a = h.add_unique(4, 10);
  Request& b = h.add_unique(4, 10);
  Request& cc = h.add_unique(4, 10);
  Request& d = h.add_unique(4, 10);
  Request& e = h.add_unique(4, 10);
  const SchedulerOutput& o1 = h.step();
  EXPECT_EQ(scheduled_ids(o1), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(o1.admission_stop, AdmissionStop::MAX_NUM_SEQS);
  // Step 2: every request needs a 2nd block. A takes 5; B preempts D (D's block 4 is prepended
  // and reused by B); C finds nothing and preempts itself.
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(o2.admission_stop, AdmissionStop::PREEMPTED);
  EXPECT_EQ(h.table(a), (std::vector<BlockId>{1, 5}));
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2, 4}));
  EXPECT_EQ(cc.status, RequestStatus::PREEMPTED);
  EXPECT_EQ(cc.num_computed_tokens, 0);
  EXPECT_EQ(cc.num_tokens(), 5);  // generated token kept
  EXPECT_EQ(d.num_preemptions, 1);
  // Waiting is now [C, D, E].
  std::vector<int64_t> order;
  RequestQueue copy = h.s.waiting();
  while (!copy.empty()) order.push_back(copy.pop()->request_id);
  EXPECT_EQ(order, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(e.status, RequestStatus::WAITING);
}

// PRIORITY: the victim is the first running request with the largest (priority, arrival).
TEST(SchedulerGolden, PriorityVictimIsFirstMax) {
  SchedulerConfig c = small(4, 4, false);  // 3 usable blocks
  c.policy = SchedulingPolicy::PRIORITY;
  Harness h(c);
  h.add_unique(4, 10, /*priority=*/0, /*arrival=*/0);
  h.add_unique(4, 10, 2, 1);
  h.add_unique(4, 10, 2, 1);
  const SchedulerOutput& o1 = h.step();
  EXPECT_EQ(scheduled_ids(o1), (std::vector<int64_t>{0, 1, 2}));
  // Step 2: request 0 needs a block: the victim is request 1 (ties with 2, comes first), not the
  // last of running. Then request 2 needs a block and is the max itself.
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{0}));
  EXPECT_EQ(h.table(h.reqs[0]), (std::vector<BlockId>{1, 2}));
}

// PRIORITY: a victim already scheduled in this step gives its tokens back and leaves the output.
TEST(SchedulerGolden, PrioritySelfPreemptionBreaksTheRunningLoop) {
  SchedulerConfig c = small(3, 4, false);  // 2 usable blocks
  c.policy = SchedulingPolicy::PRIORITY;
  Harness h(c);
  Request& low = h.add_unique(3, 10, /*priority=*/5, 0);  // served later, but admitted first
  h.step();                                               // low alone: prefill 3 -> 4 tokens
  Request& high = h.add_unique(4, 10, /*priority=*/0, 1);
  const SchedulerOutput& o2 = h.step();  // low decodes in its block; high admitted (block 2)
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{0, 1}));
  // Step 3: low (index 0) needs a 2nd block: victim = max priority = low itself -> break.
  // Order in running is [low, high]; low is the first max.
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(o3.preempted_req_ids, (std::vector<int64_t>{0}));
  EXPECT_EQ(scheduled_ids(o3), (std::vector<int64_t>{}));
  // Step 4: high needs a 2nd block; low waits; the free block goes to high.
  const SchedulerOutput& o4 = h.step();
  EXPECT_EQ(scheduled_ids(o4), (std::vector<int64_t>{1}));
  EXPECT_EQ(o4.scheduled[0].num_tokens, 1);
  EXPECT_EQ(low.status, RequestStatus::PREEMPTED);
  EXPECT_EQ(h.table(high).size(), 2u);
}

// PRIORITY: the victim is a request already scheduled earlier in this step (Scheduler.schedule's
// allocate-or-preempt loop in the RUNNING loop): it is
// unscheduled (its tokens and blocks given back), the loop index steps back, and the request that
// needed the block gets the victim's freed block.
TEST(SchedulerGolden, PriorityVictimAlreadyScheduledThisStepIsGivenBack) {
  SchedulerConfig c = small(3, 4, false);  // 2 usable blocks
  c.policy = SchedulingPolicy::PRIORITY;
  Harness h(c);
  Request& a = h.add_unique(2, 10, /*priority=*/5, 0);
  h.step();  // A alone: prefill 2 tokens in block 1, samples 1 -> 3 tokens
  EXPECT_EQ(h.table(a), (std::vector<BlockId>{1}));
  Request& b = h.add_unique(4, 10, /*priority=*/0, 1);
  const SchedulerOutput& o2 = h.step();  // A decodes in block 1; B admitted into block 2
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2}));
  // Step 3: A (index 0) decodes its 4th token in block 1 and is scheduled. B (5 tokens) needs a
  // second block, none is free: victim = first max of (priority, arrival) = A, already scheduled.
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(o3.preempted_req_ids, (std::vector<int64_t>{0}));
  EXPECT_EQ(scheduled_ids(o3), (std::vector<int64_t>{1}));
  EXPECT_EQ(scheduled_tokens(o3), (std::vector<int32_t>{1}));
  EXPECT_EQ(o3.total_num_scheduled_tokens, 1);          // A's token was given back to the budget
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2, 1}));  // A's freed block, reused LIFO
  EXPECT_TRUE(h.table(a).empty());
  EXPECT_EQ(a.status, RequestStatus::PREEMPTED);
  EXPECT_EQ(a.num_computed_tokens, 0);
  EXPECT_EQ(a.num_tokens(), 4);  // its sampled tokens are kept
  EXPECT_EQ(h.s.num_waiting(), 1);
}

// No admission in a step that preempted, then head-of-line blocking: the resumed head does not
// fit and the small request behind it is not looked at.
TEST(SchedulerGolden, NoAdmissionAfterPreemptionThenHeadOfLineBlocking) {
  Harness h(small(5, 4, false));  // 4 usable blocks
  Request& a = h.add_unique(4, 10);
  Request& b = h.add_unique(8, 10);
  h.step();  // A [1], B [2,3]
  Request& w = h.add_unique(3, 10);
  // Step 2: A takes block 4; B needs a 3rd block, preempts itself (frees 2 blocks). W would
  // fit but the waiting loop does not run.
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{a.request_id}));
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(o2.admission_stop, AdmissionStop::PREEMPTED);
  EXPECT_EQ(h.s.kv_cache_manager().num_free_blocks(), 2);
  // Step 3: B (9 tokens = 3 blocks) heads the queue and does not fit in 2 free blocks: break.
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(scheduled_ids(o3), (std::vector<int64_t>{a.request_id}));
  EXPECT_EQ(o3.admission_stop, AdmissionStop::KV_CACHE);
  EXPECT_EQ(w.status, RequestStatus::WAITING);
}

// Chunked prefill: the token budget is split in order; a partial chunk samples nothing.
TEST(SchedulerGolden, ChunkedPrefillBudgetSplits) {
  SchedulerConfig c = small(100, 4, false);
  c.max_num_batched_tokens = 8;
  c.max_num_seqs = 8;
  Harness h(c);
  Request& a = h.add_unique(20, 5);
  h.add_unique(6, 5);
  const SchedulerOutput& o1 = h.step();
  EXPECT_EQ(scheduled_tokens(o1), (std::vector<int32_t>{8}));
  EXPECT_EQ(o1.admission_stop, AdmissionStop::TOKEN_BUDGET);
  EXPECT_FALSE(o1.scheduled[0].sampled);
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(scheduled_tokens(o2), (std::vector<int32_t>{8}));
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(scheduled_ids(o3), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(scheduled_tokens(o3), (std::vector<int32_t>{4, 4}));
  EXPECT_TRUE(o3.scheduled[0].sampled);
  EXPECT_FALSE(o3.scheduled[1].sampled);
  EXPECT_EQ(a.num_output_tokens, 1);
  const SchedulerOutput& o4 = h.step();
  EXPECT_EQ(scheduled_tokens(o4), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(o4.scheduled[0].is_decode);
  EXPECT_FALSE(o4.scheduled[1].is_decode);
  EXPECT_TRUE(o4.scheduled[1].sampled);
}

TEST(SchedulerGolden, LongPrefillThresholdAndChunkingOff) {
  SchedulerConfig c = small(100, 4, false);
  c.max_num_batched_tokens = 8;
  c.max_num_seqs = 8;
  c.long_prefill_token_threshold = 5;
  Harness h(c);
  h.add_unique(12, 2);
  EXPECT_EQ(scheduled_tokens(h.step()), (std::vector<int32_t>{5}));
  EXPECT_EQ(scheduled_tokens(h.step()), (std::vector<int32_t>{5}));
  EXPECT_EQ(scheduled_tokens(h.step()), (std::vector<int32_t>{2}));

  SchedulerConfig off = small(100, 4, false);
  off.max_num_batched_tokens = 8;
  off.max_num_seqs = 8;
  off.max_model_len = 8;
  off.enable_chunked_prefill = false;
  Harness g(off);
  g.add_unique(6, 1);
  g.add_unique(6, 1);
  const SchedulerOutput& o = g.step();  // 6 + 6 > 8: the second prompt waits whole
  EXPECT_EQ(scheduled_tokens(o), (std::vector<int32_t>{6}));
  EXPECT_EQ(o.admission_stop, AdmissionStop::TOKEN_BUDGET);
}

// A preempted request re-hits its own cached prefix when it is resumed
// (Scheduler._preempt_request keeps its block hashes).
TEST(SchedulerGolden, ResumedRequestReHitsOwnPrefix) {
  Harness h(small(6, 4, true));  // 5 usable blocks
  Request& a = h.add_unique(4, 6);
  Request& b = h.add_unique(9, 20);
  h.step();  // A [1], B [2,3,4]; free [5]
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2, 3, 4}));
  h.step();  // A takes 5
  h.step();
  h.step();                              // B's block 4 becomes full and hashed
  const SchedulerOutput& o5 = h.step();  // B needs a 4th block: preempts itself
  EXPECT_EQ(o5.preempted_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{4, 3, 2}));  // hashed: appended reversed
  const SchedulerOutput& o6 = h.step();  // A pops 4 (evicts it) and finishes; B cannot fit yet
  EXPECT_EQ(o6.admission_stop, AdmissionStop::KV_CACHE);
  EXPECT_EQ(a.status, RequestStatus::FINISHED_LENGTH_CAPPED);
  const SchedulerOutput& o7 = h.step();
  ASSERT_EQ(scheduled_ids(o7), (std::vector<int64_t>{b.request_id}));
  EXPECT_TRUE(o7.scheduled[0].is_resumed);
  EXPECT_EQ(o7.scheduled[0].num_prefix_hit_tokens, 8);  // blocks 2,3 survived; 4 was evicted
  EXPECT_EQ(o7.scheduled[0].num_tokens, 13 - 8);
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2, 3, 4, 5}));
  // The 0.26.0 wheel records every lookup: B's failed one in step 6 (blocks 2,3 hit: 8 tokens)
  // and its admission in step 7 (8 again), both only under preempted_*.
  const PrefixCacheStats& st = h.s.kv_cache_manager().prefix_cache_stats();
  EXPECT_EQ(st.preempted_requests, 2);
  EXPECT_EQ(st.preempted_hits, 16);
  EXPECT_EQ(st.preempted_queries, 26);
}

// Watermark: a waiting request pays int(watermark * N) blocks unless running is empty.
TEST(SchedulerGolden, WatermarkHeadroom) {
  for (double wm : {0.0, 0.2}) {
    SchedulerConfig c = small(10, 4, false);  // 9 usable
    c.watermark = wm;
    Harness h(c);
    h.add_unique(16, 5);  // 4 blocks, running empty: no watermark
    h.add_unique(16, 5);  // 4 blocks: 4 + int(0.2 * 10) = 6 > 5 free
    const SchedulerOutput& o = h.step();
    EXPECT_EQ(o.scheduled.size(), wm == 0.0 ? 2u : 1u) << "watermark " << wm;
  }
}

// Full-sequence gate: admission needs room for the whole current sequence, not the chunk.
TEST(SchedulerGolden, FullSequenceGate) {
  for (bool gate : {true, false}) {
    SchedulerConfig c = small(6, 4, false);  // 5 usable
    c.max_num_batched_tokens = 12;
    c.max_num_seqs = 12;
    c.scheduler_reserve_full_isl = gate;
    Harness h(c);
    h.add_unique(8, 5);   // 2 blocks, budget left 4
    h.add_unique(16, 5);  // whole prompt: 4 blocks > 3 free; its 4-token chunk: 1 block
    const SchedulerOutput& o = h.step();
    ASSERT_EQ(o.scheduled.size(), gate ? 1u : 2u) << "gate " << gate;
    if (!gate) {
      EXPECT_EQ(o.scheduled[1].num_tokens, 4);
    }
  }
}

TEST(SchedulerGolden, MaxModelLenStopsAndArrivalRejections) {
  SchedulerConfig c = small(5, 4, false);  // 4 usable, cdiv(L=20, 4) == 5 == N
  c.max_model_len = 20;
  Harness h(c);
  Request r;
  RejectReason why{};
  r.num_prompt_tokens = 0;
  EXPECT_FALSE(h.s.check_new_request(r, &why));
  EXPECT_EQ(why, RejectReason::EMPTY_PROMPT);
  r.num_prompt_tokens = 20;
  EXPECT_FALSE(h.s.check_new_request(r, &why));
  EXPECT_EQ(why, RejectReason::PROMPT_TOO_LONG);
  r.num_prompt_tokens = 17;  // 5 blocks > N - 1
  EXPECT_FALSE(h.s.check_new_request(r, &why));
  EXPECT_EQ(why, RejectReason::PROMPT_EXCEEDS_POOL);
  r.num_prompt_tokens = 16;
  EXPECT_TRUE(h.s.check_new_request(r, &why));
  // A request stops when num_tokens reaches max_model_len even below max_tokens.
  Request& x = h.add_unique(14, 100);
  h.step();  // prefill 14, sample: 15 tokens
  EXPECT_EQ(x.num_tokens(), 15);
  h.step();  // C = 15, 16 tokens
  h.step();  // C = 16 fills block 4, 17 tokens
  EXPECT_EQ(x.status, RequestStatus::RUNNING);
  h.step();  // position 16 needs a 5th block; only 4 are usable: self-preemption
  EXPECT_EQ(x.status, RequestStatus::PREEMPTED);
}

TEST(SchedulerGolden, ConfigValidation) {
  SchedulerConfig c = small(10, 4, true);
  c.max_num_seqs = 0;
  EXPECT_THROW(Scheduler{c}, std::invalid_argument);
  c = small(10, 4, true);
  c.watermark = 1.0;
  EXPECT_THROW(Scheduler{c}, std::invalid_argument);
  c = small(10, 4, true);
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 100;  // < max_model_len 1000
  EXPECT_THROW(Scheduler{c}, std::invalid_argument);
}

TEST(SchedulerGolden, MaxModelLenFinishes) {
  SchedulerConfig c = small(100, 4, false);
  c.max_model_len = 12;
  Harness h(c);
  Request& x = h.add_unique(10, 100);
  h.step();                             // 11 tokens
  const SchedulerOutput& o = h.step();  // 12 = L: finished
  EXPECT_TRUE(o.scheduled[0].finished);
  EXPECT_EQ(x.num_output_tokens, 2);
  EXPECT_EQ(x.status, RequestStatus::FINISHED_LENGTH_CAPPED);
}

std::vector<std::pair<BlockId, int64_t>> swaps(std::span<const BlockSwap> v) {
  std::vector<std::pair<BlockId, int64_t>> out;
  for (const BlockSwap& s : v) out.emplace_back(s.device_block, s.host_slot);
  return out;
}

SchedulerConfig swap_config(int64_t host_slots) {
  SchedulerConfig c = small(5, 4, false);  // 4 usable blocks: 1, 2, 3, 4
  c.preemption_mode = PreemptionMode::SWAP;
  c.num_host_swap_slots = host_slots;
  return c;
}

// SWAP mode: the victim's computed blocks go to host slots 0, 1 in table order, it keeps its
// computed tokens, and on resume it gets a fresh table whose first blocks are swapped back in;
// nothing is recomputed.
TEST(SchedulerGolden, SwapOutThenSwapInWithoutRecompute) {
  Harness h(swap_config(8));
  Request& a = h.add_unique(4, 3);
  Request& b = h.add_unique(8, 3);
  // Step 1: A [1], B [2, 3]; both finish their prefill and sample: A 5 tokens, B 9.
  h.step();
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{2, 3}));
  // Step 2: A takes block 4; B needs a 3rd block, none is free: B preempts itself. Its 8
  // computed tokens fill 2 blocks -> slots 0, 1; then [3, 2] is freed (reverse order).
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(scheduled_ids(o2), (std::vector<int64_t>{a.request_id}));
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(o2.swapped_out_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(swaps(o2.swap_out), (std::vector<std::pair<BlockId, int64_t>>{{2, 0}, {3, 1}}));
  EXPECT_TRUE(o2.swap_in.empty());
  EXPECT_EQ(o2.num_swap_fallbacks, 0);
  EXPECT_EQ(b.status, RequestStatus::PREEMPTED);
  EXPECT_EQ(b.num_computed_tokens, 8);  // kept: the KV is on host
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{}));
  EXPECT_EQ(std::vector<int64_t>(h.s.host_slots(b.request_id).begin(),
                                 h.s.host_slots(b.request_id).end()),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(h.s.num_free_host_slots(), 6);
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{3, 2}));
  // Step 3: A decodes in its 2 blocks; B (9 tokens -> 3 blocks under the full-sequence gate)
  // does not fit the 2 free blocks. A reaches max_tokens = 3 and frees [4, 1].
  const SchedulerOutput& o3 = h.step();
  EXPECT_EQ(o3.admission_stop, AdmissionStop::KV_CACHE);
  EXPECT_TRUE(o3.swap_in.empty());
  EXPECT_EQ(a.status, RequestStatus::FINISHED_LENGTH_CAPPED);
  EXPECT_EQ(h.free_queue(), (std::vector<BlockId>{4, 1, 3, 2}));
  // Step 4: B resumes: no prefix lookup, allocate_slots(C = 8, n = 1) gives cdiv(9, 4) = 3 new
  // blocks [4, 1, 3]; the first cdiv(8, 4) = 2 are filled from slots 0 and 1; only the sampled
  // token is computed (a decode), and the host slots are free again.
  const SchedulerOutput& o4 = h.step();
  ASSERT_EQ(scheduled_ids(o4), (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(swaps(o4.swap_in), (std::vector<std::pair<BlockId, int64_t>>{{4, 0}, {1, 1}}));
  EXPECT_EQ(o4.swapped_in_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_TRUE(o4.swap_out.empty());
  EXPECT_EQ(o4.scheduled[0].num_tokens, 1);
  EXPECT_EQ(o4.scheduled[0].num_computed_tokens, 8);
  EXPECT_TRUE(o4.scheduled[0].is_resumed);
  EXPECT_TRUE(o4.scheduled[0].is_swapped_in);
  EXPECT_TRUE(o4.scheduled[0].is_decode);
  EXPECT_EQ(o4.scheduled[0].num_prefix_hit_tokens, 0);
  EXPECT_EQ(h.table(b), (std::vector<BlockId>{4, 1, 3}));
  EXPECT_EQ(h.s.num_free_host_slots(), 8);
  EXPECT_TRUE(h.s.host_slots(b.request_id).empty());
  EXPECT_EQ(b.num_computed_tokens, 9);
  EXPECT_EQ(b.num_output_tokens, 2);
}

// SWAP mode with too few host slots: the victim is recomputed as in vLLM v1 and counted.
TEST(SchedulerGolden, SwapFallsBackToRecomputeWhenHostSlotsRunOut) {
  Harness h(swap_config(1));  // B's 8 computed tokens need 2 slots
  h.add_unique(4, 3);
  Request& b = h.add_unique(8, 3);
  h.step();
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(o2.num_swap_fallbacks, 1);
  EXPECT_TRUE(o2.swap_out.empty());
  EXPECT_TRUE(o2.swapped_out_req_ids.empty());
  EXPECT_EQ(b.num_computed_tokens, 0);
  EXPECT_EQ(h.s.num_free_host_slots(), 1);
  h.step();
  // Resumed by recompute: all 9 tokens are prefilled again, nothing is swapped in.
  const SchedulerOutput& o4 = h.step();
  ASSERT_EQ(scheduled_ids(o4), (std::vector<int64_t>{b.request_id}));
  EXPECT_EQ(o4.scheduled[0].num_tokens, 9);
  EXPECT_FALSE(o4.scheduled[0].is_swapped_in);
  EXPECT_TRUE(o4.swap_in.empty());
}

// RECOMPUTE mode (the default) never emits swaps, even with host slots configured.
TEST(SchedulerGolden, RecomputeModeEmitsNoSwaps) {
  SchedulerConfig c = swap_config(8);
  c.preemption_mode = PreemptionMode::RECOMPUTE;
  Harness h(c);
  h.add_unique(4, 3);
  Request& b = h.add_unique(8, 3);
  h.step();
  const SchedulerOutput& o2 = h.step();
  EXPECT_EQ(o2.preempted_req_ids, (std::vector<int64_t>{b.request_id}));
  EXPECT_TRUE(o2.swap_out.empty());
  EXPECT_EQ(o2.num_swap_fallbacks, 0);
  EXPECT_EQ(b.num_computed_tokens, 0);
}

TEST(SchedulerConfigValidate, NegativeHostSwapSlotsNamed) {
  SchedulerConfig c = swap_config(-1);
  try {
    validate(c);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_host_swap_slots"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvsim
