// Replay engine tests: clock rules, rejections and the livelock guard, property tests on random
// small traces (every request finishes or is rejected, invariants after every step, token
// conservation, determinism), StepBatch consistency, and end-to-end runs of the bundled traces.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "bundled_trace.h"
#include "kvsim/core/kv_backend.h"
#include "kvsim/core/param.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replica_engine.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"
#include "random_trace.h"

namespace kvsim {
namespace {

TraceRequest tr(int64_t arrival_ns, int32_t in, int32_t out) {
  TraceRequest t;
  t.arrival_ns = arrival_ns;
  t.input_tokens = in;
  t.output_tokens = out;
  return t;
}

ReplayConfig small_config(int32_t blocks, int32_t bs, int32_t max_model_len) {
  ReplayConfig c;
  c.scheduler.num_gpu_blocks = blocks;
  c.scheduler.block_size = bs;
  c.scheduler.max_model_len = max_model_len;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_num_seqs = 8;
  c.check_invariants = true;
  return c;
}

// Checks every StepBatch against the invariants of vLLM's worker-side metadata and remembers
// which (request, position) each slot holds, so reads can be checked position by position.
class CheckingBackend final : public KvBackend {
 public:
  const char* name() const override { return "checking"; }
  StepExecution execute(const StepBatch& b) override {
    ++batches;
    EXPECT_EQ(b.block_table_offsets.size(), b.reads.size() + 1);
    size_t k = 0;
    for (size_t w = 0; w < b.writes.size(); ++w) {
      const TokenWrite& tw = b.writes[w];
      const SequenceRead& rd = b.reads[w];
      EXPECT_EQ(rd.request_id, tw.request_id);
      EXPECT_EQ(rd.seq_len, tw.first_position + tw.num_tokens);
      const auto begin = static_cast<size_t>(b.block_table_offsets[w]);
      const auto end = static_cast<size_t>(b.block_table_offsets[w + 1]);
      EXPECT_EQ(static_cast<int64_t>(end - begin), cdiv(rd.seq_len, b.block_size));
      // Positions written by earlier steps: each slot must hold that same position.
      for (int32_t pos = 0; pos < tw.first_position; ++pos) {
        const int64_t slot =
            static_cast<int64_t>(b.block_tables[begin + static_cast<size_t>(pos / b.block_size)]) *
                b.block_size +
            pos % b.block_size;
        auto it = position_of_slot.find(slot);
        if (it == position_of_slot.end() || it->second != pos) ++bad_reads;
      }
      for (int32_t i = 0; i < tw.num_tokens; ++i, ++k) {
        const int64_t slot = b.slot_mapping[k];
        const int32_t pos = tw.first_position + i;
        EXPECT_GE(slot, b.block_size) << "write into the null block";
        EXPECT_EQ(slot / b.block_size,
                  b.block_tables[begin + static_cast<size_t>(pos / b.block_size)]);
        position_of_slot[slot] = pos;
      }
    }
    EXPECT_EQ(k, b.slot_mapping.size());
    return {};
  }
  int64_t batches = 0;
  int64_t bad_reads = 0;
  std::map<int64_t, int32_t> position_of_slot;
};

TEST(Replay, ClockAdvancesOnlyOnStepsAndJumpsWhenIdle) {
  Trace t;
  t.requests = {tr(0, 4, 2), tr(1'000'000'000, 4, 1)};
  ReplayConfig c = small_config(100, 4, 100);
  FixedStepTime step(10.0);
  NullKvBackend null;
  const ReplayResult r = run_replay(c, t, null, step);
  // Request 0: prefill step [0, 10ms) -> token 1, decode [10, 20ms) -> token 2, done at 20 ms.
  // Then idle until 1 s; request 1: one step, done at 1.01 s.
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_EQ(r.requests[0].first_scheduled_ns, 0);
  EXPECT_EQ(r.requests[0].first_token_ns, 10'000'000);
  EXPECT_EQ(r.requests[0].finish_ns, 20'000'000);
  EXPECT_EQ(r.requests[1].first_scheduled_ns, 1'000'000'000);
  EXPECT_EQ(r.requests[1].finish_ns, 1'010'000'000);
  EXPECT_EQ(r.summary.steps, 3);
  EXPECT_EQ(r.summary.sim_ns, 1'010'000'000);
  EXPECT_EQ(r.summary.busy_ns, 30'000'000);
  EXPECT_EQ(r.timeline.size(), 3u);
  EXPECT_EQ(r.summary.finished, 2);
  EXPECT_DOUBLE_EQ(r.summary.latency.ttft.p50, 0.01);
}

// A finished or rejected request's hash list is freed, not just emptied: a replay's memory must
// follow the requests in flight, not the trace length (issue #10). `block_hashes = {}` kept the
// capacity of every finished request until the end.
TEST(Replay, FinishedAndRejectedRequestsReleaseTheirHashLists) {
  Trace t;
  t.requests = {tr(0, 40, 3), tr(1, 90, 2), tr(2, 500, 1), tr(3, 33, 4)};  // #2: prompt too long
  ReplayConfig c = small_config(100, 4, 100);
  c.scheduler.enable_prefix_caching = true;
  FixedStepTime step(10.0);
  NullKvBackend null;
  ReplayRequests reqs = make_replay_requests(t);
  ReplicaEngine engine(c, null, step, reqs);
  for (int64_t id = 0; id < 4; ++id) engine.add_request(id);
  bool saw_hashes = false;
  while (engine.next_event_ns() != ReplicaEngine::kNoEvent) {
    engine.step();
    // Content-free prompts: their (private) hashes are deferred, but counted.
    for (const Request& r : reqs.requests) saw_hashes |= r.num_block_hashes() > 0;
  }
  engine.finish();
  EXPECT_TRUE(saw_hashes);
  EXPECT_EQ(engine.summary().finished, 3);
  EXPECT_EQ(engine.summary().rejected, 1);
  for (const Request& r : reqs.requests) {
    EXPECT_TRUE(is_finished(r.status)) << r.request_id;
    EXPECT_EQ(r.block_hashes.capacity(), 0u) << r.request_id;
    EXPECT_EQ(r.num_block_hashes(), 0) << r.request_id;
  }
}

TEST(Replay, ClockOverflowIsAnErrorNotSignedOverflow) {
  // One request arriving at the latest allowed time, then one-hour decode steps: the clock has
  // 2^62 - 1 ns of room, i.e. floor((2^62 - 1) / 3.6e12) = 1281023 steps; the next one must throw.
  constexpr int64_t kStepNs = int64_t{3600} * 1'000'000'000;
  constexpr int64_t kFits = (kMaxArrivalNs - 1) / kStepNs;
  constexpr int32_t kOutput = 1'300'000;
  Trace t;
  t.path = "late.csv";
  t.requests = {tr(kMaxArrivalNs, 1, kOutput)};
  ReplayConfig c = small_config(kOutput / 16 + 4, 16, kOutput + 2);
  c.check_invariants = false;
  c.record_timeline = false;
  FixedStepTime step(3.6e6);
  NullKvBackend null;
  try {
    run_replay(c, t, null, step);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(spell_params(e.what(), ParamSpelling::kCli),
              fmt::format("simulated clock overflow at step {}: t = {} ns plus a step of {} ns "
                          "leaves 64-bit nanoseconds (292 years); use a shorter --step-time or "
                          "trace",
                          kFits + 1, kMaxArrivalNs + kFits * kStepNs, kStepNs));
  }
}

TEST(Replay, ArrivalOutsideTheClockRangeIsRejected) {
  Trace t;
  t.path = "x.csv";
  t.requests = {tr(0, 4, 1), tr(kMaxArrivalNs + 1, 4, 1)};
  t.requests[1].source_line = 3;
  FixedStepTime step(10.0);
  NullKvBackend null;
  try {
    run_replay(small_config(100, 4, 100), t, null, step);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "trace x.csv: arrival of request 1 (line 3) is 4611686018427387905 ns, outside [0, "
              "2^62]");
  }
}

TEST(Replay, ArrivalAtStepBoundaryJoinsThatStep) {
  Trace t;
  t.requests = {tr(0, 4, 3), tr(10'000'000, 4, 1)};  // arrives exactly when step 1 ends
  FixedStepTime step(10.0);
  NullKvBackend null;
  const ReplayResult r = run_replay(small_config(100, 4, 100), t, null, step);
  EXPECT_EQ(r.requests[1].first_scheduled_ns, 10'000'000);
}

// Off-by-one: cdiv(L, bs) == N passes vLLM's start-up check (vllm/v1/core/kv_cache_utils.py
// check_enough_kv_cache_memory), but only N - 1 blocks are usable. A prompt needing N blocks is
// rejected at arrival; a request that grows past N - 1 blocks preempts itself and is aborted,
// never a hang.
TEST(Replay, OffByOnePoolRejectsInsteadOfHanging) {
  Trace t;
  t.requests = {tr(0, 17, 1), tr(0, 14, 5), tr(0, 0, 3), tr(0, 20, 1)};
  ReplayConfig c = small_config(5, 4, 20);
  FixedStepTime step(1.0);
  NullKvBackend null;
  const ReplayResult r = run_replay(c, t, null, step);
  EXPECT_EQ(r.summary.rejected, 4);
  EXPECT_EQ(r.summary.finished, 0);
  const auto& by = r.summary.rejected_by_reason;
  EXPECT_EQ(by[static_cast<size_t>(RejectReason::PROMPT_EXCEEDS_POOL)], 1);
  EXPECT_EQ(by[static_cast<size_t>(RejectReason::EMPTY_PROMPT)], 1);
  EXPECT_EQ(by[static_cast<size_t>(RejectReason::PROMPT_TOO_LONG)], 1);
  EXPECT_EQ(by[static_cast<size_t>(RejectReason::NEVER_ADMITTABLE)], 1);
  EXPECT_TRUE(r.requests[1].rejected);
  EXPECT_EQ(r.requests[1].preemptions, 1);
  EXPECT_EQ(r.summary.preemptions, 1);
  // Aborted at run time: it keeps the 3 tokens it generated (15, 16, 17 tokens fit 4 blocks; the
  // 4th decode needs a 5th) and its end time is when it was aborted.
  EXPECT_EQ(r.requests[1].output_tokens, 3);
  EXPECT_GT(r.requests[1].finish_ns, r.requests[1].first_token_ns);
  // Without the gate the preempted request is aborted at preemption.
  c.scheduler.scheduler_reserve_full_isl = false;
  const ReplayResult g = run_replay(c, t, null, step);
  EXPECT_EQ(g.summary.rejected_by_reason[static_cast<size_t>(RejectReason::OUTGREW_POOL)], 1);
}

// A request whose trace output does not fit max_model_len stops there: finished, and counted
// apart (issue 23), in the summary, the text report and the JSON.
TEST(Replay, RequestsCutAtMaxModelLenHaveTheirOwnCount) {
  Trace t;
  t.requests = {tr(0, 10, 5), tr(0, 10, 35), tr(0, 4, 40), tr(0, 4, 35)};
  ReplayConfig c = small_config(100, 4, 40);
  FixedStepTime step(1.0);
  NullKvBackend null;
  for (bool async : {false, true}) {
    c.scheduler.async_scheduling = async;
    const ReplayResult r = run_replay(c, t, null, step);
    EXPECT_EQ(r.summary.finished, 4) << async;
    // 10 + 35 and 4 + 40 reach 40 tokens at 30 and 36 outputs; 4 + 35 = 39 fits.
    EXPECT_EQ(r.summary.finished_at_max_model_len, 2) << async;
    EXPECT_EQ(r.requests[1].output_tokens, 30);
    EXPECT_EQ(r.requests[2].output_tokens, 36);
    EXPECT_EQ(r.requests[3].output_tokens, 35);
  }
}

struct RandomCase {
  Trace trace;
  ReplayConfig config;
};

RandomCase random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  RandomCase rc;
  rc.config = test::random_small_config(rng);
  rc.trace = test::random_trace(rng, test::DrawOrder::kOutputFirst);
  return rc;
}

void check_properties(const RandomCase& rc, const ReplayResult& r, uint64_t seed) {
  const SchedulerConfig& sc = rc.config.scheduler;
  ASSERT_EQ(r.summary.finished + r.summary.rejected, r.summary.requests) << "seed " << seed;
  int64_t scheduled = 0;
  for (const RequestRecord& rec : r.requests) {
    ASSERT_NE(rec.finished, rec.rejected) << "seed " << seed << " request " << rec.request_id;
    scheduled += rec.scheduled_tokens;
    if (!rec.finished) continue;
    const int32_t total = rec.prompt_tokens + rec.output_tokens;
    // Stop rule: max_tokens reached, or max_model_len.
    EXPECT_TRUE(rec.output_tokens == rec.max_tokens || total == sc.max_model_len) << seed;
    EXPECT_LE(total, sc.max_model_len);
    // Token conservation: every position but the last sampled token is computed exactly once
    // unless recomputed; hits stand in for computed positions.
    EXPECT_EQ(rec.computed_high_water, total - 1) << seed;
    if (rec.preemptions == 0) {
      EXPECT_EQ(rec.scheduled_tokens + rec.prefix_hit_tokens, total - 1) << seed;
      EXPECT_EQ(rec.recomputed_tokens, 0);
    } else {
      EXPECT_GE(rec.scheduled_tokens + rec.prefix_hit_tokens, total - 1) << seed;
      EXPECT_LE(rec.recomputed_tokens, rec.scheduled_tokens);
    }
    EXPECT_LE(rec.arrival_ns, rec.first_scheduled_ns);
    EXPECT_LE(rec.first_scheduled_ns, rec.first_token_ns);
    EXPECT_LE(rec.first_token_ns, rec.finish_ns);
  }
  EXPECT_EQ(scheduled, r.summary.scheduled_tokens) << seed;
  EXPECT_EQ(r.summary.prefill_tokens + r.summary.decode_tokens, r.summary.scheduled_tokens);
  for (const TimelineRow& row : r.timeline) {
    EXPECT_LE(row.scheduled_tokens, sc.max_num_batched_tokens) << seed;
    EXPECT_LE(row.running, sc.max_num_seqs) << seed;
    EXPECT_EQ(row.used_blocks + row.free_blocks, sc.num_gpu_blocks - 1);
    EXPECT_GE(row.padding_tokens, 0);
  }
}

TEST(ReplayProperties, RandomSmallTraces) {
  FixedStepTime step(1.0);
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    const RandomCase rc = random_case(seed);
    if (std::getenv("KVSIM_TEST_VERBOSE")) {
      const SchedulerConfig& x = rc.config.scheduler;
      fprintf(stderr,
              "seed %d bs %d L %d N %d seqs %d budget %d cache %d chunk %d prio %d wm %g gate %d "
              "thr %d la %d\n",
              static_cast<int>(seed), x.block_size, x.max_model_len, x.num_gpu_blocks,
              x.max_num_seqs, x.max_num_batched_tokens, x.enable_prefix_caching,
              x.enable_chunked_prefill, static_cast<int>(x.policy), x.watermark,
              x.scheduler_reserve_full_isl, x.long_prefill_token_threshold, x.num_lookahead_tokens);
      for (const auto& q : rc.trace.requests)
        fprintf(stderr, "  t=%ld in=%d out=%d prio=%d\n", static_cast<long>(q.arrival_ns),
                q.input_tokens, q.output_tokens, q.priority);
    }
    CheckingBackend backend;
    const ReplayResult r = run_replay(rc.config, rc.trace, backend, step);
    check_properties(rc, r, seed);
    EXPECT_EQ(backend.bad_reads, 0) << "seed " << seed;
    EXPECT_EQ(backend.batches, r.summary.steps);
    // Determinism, and the null path takes exactly the same decisions as a real backend.
    NullKvBackend null;
    const ReplayResult again = run_replay(rc.config, rc.trace, null, step);
    ASSERT_EQ(again.timeline.size(), r.timeline.size()) << seed;
    for (size_t i = 0; i < r.timeline.size(); ++i) {
      EXPECT_EQ(again.timeline[i].time_ns, r.timeline[i].time_ns);
      EXPECT_EQ(again.timeline[i].scheduled_tokens, r.timeline[i].scheduled_tokens);
      EXPECT_EQ(again.timeline[i].used_blocks, r.timeline[i].used_blocks);
      EXPECT_EQ(again.timeline[i].padding_tokens, r.timeline[i].padding_tokens);
    }
    EXPECT_EQ(again.summary.preemptions, r.summary.preemptions);
    if (::testing::Test::HasFailure()) return;
  }
}

// The same properties under async scheduling (vLLM's default loop, batch queue of 2): every
// request finishes or is rejected, tokens are conserved (no extra position is computed for a
// request whose in-flight token is its last), every KV read finds the right position in the
// CheckingBackend, and the clock keeps batches back to back.
TEST(ReplayProperties, RandomSmallTracesAsync) {
  FixedStepTime step(1.0);
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    RandomCase rc = random_case(seed);
    rc.config.scheduler.async_scheduling = true;
    CheckingBackend backend;
    const ReplayResult r = run_replay(rc.config, rc.trace, backend, step);
    check_properties(rc, r, seed);
    EXPECT_EQ(backend.bad_reads, 0) << "seed " << seed;
    EXPECT_EQ(backend.batches, r.summary.steps);
    EXPECT_TRUE(r.summary.async_scheduling);
    int64_t prev_end = 0;
    for (const TimelineRow& row : r.timeline) {
      EXPECT_GE(row.time_ns, prev_end) << seed;  // one batch at a time on the GPU
      prev_end = row.time_ns + row.duration_ns;
    }
    EXPECT_EQ(r.summary.sim_ns >= prev_end, true) << seed;
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Replay, LivelockGuardThrowsWithDiagnosis) {
  // A running request whose only schedulable step is blocked forever cannot arise from vLLM's
  // rules with sane configs; the guard is exercised with livelock_steps = 1 on a step that
  // schedules nothing but preempts (a self-preemption).
  Trace t;
  t.requests = {tr(0, 4, 1), tr(0, 8, 10)};
  ReplayConfig c = small_config(4, 4, 40);
  c.livelock_steps = 1;
  FixedStepTime step(1.0);
  NullKvBackend null;
  try {
    run_replay(c, t, null, step);
    FAIL() << "expected the livelock guard";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("livelock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("waiting=1"), std::string::npos) << e.what();
  }
}

struct BundledCase {
  const char* file;
  int64_t max_requests;
};

TEST(ReplayEndToEnd, EveryBundledTraceFormat) {
  const BundledCase cases[] = {{"AzureLLMInferenceTrace_conv.csv", 300},
                               {"AzureLLMInferenceTrace_code.csv", 300},
                               {"splitwise_conv.csv", 300},
                               {"conversation_trace.jsonl", 150},
                               {"BurstGPT_1.head400.csv", 400},
                               {"sharegpt_8k_filtered_stats_llama2_tokenizer.csv", 200}};
  FixedStepTime step(20.0);
  for (const BundledCase& bc : cases) {
    TraceReadOptions opt;
    opt.max_requests = bc.max_requests;
    const Trace trace = read_trace(bundled(bc.file), opt);
    ReplayConfig c;
    c.scheduler.block_size = 16;
    c.scheduler.num_gpu_blocks = 4000;
    c.scheduler.max_model_len = default_max_model_len(trace);
    c.scheduler.max_num_batched_tokens = 8192;
    c.scheduler.max_num_seqs = 256;
    NullKvBackend null;
    const ReplayResult r = run_replay(c, trace, null, step);
    EXPECT_EQ(r.summary.requests, static_cast<int64_t>(trace.requests.size())) << bc.file;
    EXPECT_EQ(r.summary.finished + r.summary.rejected, r.summary.requests) << bc.file;
    EXPECT_GT(r.summary.finished, 0) << bc.file;
    EXPECT_GT(r.summary.steps, 0) << bc.file;
    EXPECT_GT(r.summary.peak_running, 0) << bc.file;
    if (std::string(bc.file) == "conversation_trace.jsonl") {
      // Mooncake requests all start with the same 512-token block: prefix hits are certain.
      EXPECT_GT(r.summary.prefix_cache_hit_rate, 0.0);
    }
    if (std::string(bc.file).rfind("Azure", 0) == 0) {
      EXPECT_EQ(r.summary.prefix_cache.hits, 0) << "Azure has no prompt content to share";
    }
  }
}

}  // namespace
}  // namespace kvsim
