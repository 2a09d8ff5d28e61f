// make_replay_config / resolve_max_model_len / plan_replay_pool: the one place replay, sweep and
// bench_replay turn settings into a ReplayConfig.
#include <stdexcept>

#include <gtest/gtest.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/engine/replay_setup.h"

namespace kvsim {
namespace {

Trace two_requests() {
  Trace t;
  t.path = "t";
  TraceRequest a;
  a.input_tokens = 1000;
  a.output_tokens = 200;
  TraceRequest b;
  b.input_tokens = 300;
  b.output_tokens = 3000;
  t.requests = {a, b};
  return t;
}

PlanInputs qwen_on(const char* gpu) {
  PlanInputs in;
  in.model = find_model_preset("qwen2.5-7b");
  in.gpu = find_gpu_preset(gpu);
  return in;
}

TEST(ReplaySetup, MaxModelLenDefaults) {
  const Trace t = two_requests();
  PlanInputs named = qwen_on("rtx4090");
  resolve_max_model_len(named, t);
  EXPECT_EQ(named.max_model_len, 0) << "a named model keeps its max_position_embeddings";
  PlanInputs dflt = qwen_on("rtx4090");
  resolve_max_model_len(dflt, t, /*model_is_default=*/true);
  EXPECT_EQ(dflt.max_model_len, 1 + 300 + 3000);
  PlanInputs given = qwen_on("rtx4090");
  given.max_model_len = 777;
  resolve_max_model_len(given, t, true);
  EXPECT_EQ(given.max_model_len, 777);
}

// A hybrid model's plan depends on the batch in flight; a replay plans with its own scheduler
// settings, so it reports what `kvsim plan` prints for the same flags.
TEST(ReplaySetup, HybridPlanUsesTheReplaysSchedulerSettings) {
  PlanInputs in;
  in.model = find_model_preset("gpt-oss-20b");
  in.gpu = find_gpu_preset("h100-80g");
  in.max_model_len = 32768;
  in.kv_cache_memory_bytes = int64_t{10} << 30;
  ReplaySettings s;
  const Plan defaults = plan_replay_pool(in, s);
  EXPECT_EQ(defaults.vllm_max_concurrency, compute_plan(in).vllm_max_concurrency);
  s.async_scheduling = false;
  s.max_num_batched_tokens = 2048;
  const Plan sync_small = plan_replay_pool(in, s);
  PlanInputs expected = in;
  expected.async_scheduling = false;
  expected.max_num_batched_tokens = 2048;
  EXPECT_EQ(sync_small.vllm_max_concurrency, compute_plan(expected).vllm_max_concurrency);
  EXPECT_GT(sync_small.vllm_max_concurrency, defaults.vllm_max_concurrency)
      << "a smaller batch in flight reserves fewer window blocks per request";
  EXPECT_EQ(sync_small.num_gpu_blocks, defaults.num_gpu_blocks);
  // SWAP preemption runs sync when async is not asked for (make_replay_config's rule).
  ReplaySettings swap;
  swap.scheduler.preemption_mode = PreemptionMode::SWAP;
  expected = in;
  expected.async_scheduling = false;
  EXPECT_EQ(plan_replay_pool(in, swap).vllm_max_concurrency,
            compute_plan(expected).vllm_max_concurrency);
}

TEST(ReplaySetup, BatchLimitsAndChunkedPrefillRule) {
  PlanInputs in = qwen_on("rtx4090");
  in.max_model_len = 4096;
  const Plan plan = plan_replay_pool(in);
  ReplaySettings s;
  ReplayConfig rc = make_replay_config(plan, in.gpu, s);
  EXPECT_EQ(rc.scheduler.max_num_batched_tokens, 2048);
  EXPECT_EQ(rc.scheduler.max_num_seqs, 256);
  EXPECT_EQ(rc.scheduler.num_gpu_blocks, plan.num_gpu_blocks);
  EXPECT_EQ(rc.scheduler.max_model_len, 4096);
  EXPECT_FALSE(rc.record_timeline);
  s.scheduler.enable_chunked_prefill = false;
  rc = make_replay_config(plan, in.gpu, s);
  EXPECT_EQ(rc.scheduler.max_num_batched_tokens, 4096);
  s.max_num_batched_tokens = 5000;
  s.max_num_seqs = 7;
  rc = make_replay_config(plan, in.gpu, s);
  EXPECT_EQ(rc.scheduler.max_num_batched_tokens, 5000);
  EXPECT_EQ(rc.scheduler.max_num_seqs, 7);
  s.max_num_batched_tokens = 1000;  // explicit and < L with chunked prefill off: vLLM refuses
  EXPECT_THROW(make_replay_config(plan, in.gpu, s), std::invalid_argument);
}

TEST(ReplaySetup, SwapSlotsFromSpace) {
  PlanInputs in = qwen_on("rtx4090");
  in.max_model_len = 4096;
  const Plan plan = plan_replay_pool(in);
  ReplaySettings s;
  s.scheduler.preemption_mode = PreemptionMode::SWAP;
  s.swap_space_gib = 1.0;
  const ReplayConfig rc = make_replay_config(plan, in.gpu, s);
  EXPECT_EQ(rc.scheduler.num_host_swap_slots, (int64_t{1} << 30) / plan.bytes_per_block);
  EXPECT_EQ(rc.swap_bytes_per_block, plan.bytes_per_block);
  EXPECT_DOUBLE_EQ(rc.swap_bandwidth_bytes_per_s, 25e9);
  s.swap_bandwidth_gbps = 0;
  EXPECT_THROW(make_replay_config(plan, in.gpu, s), std::invalid_argument);
}

TEST(ReplaySetup, RefusesPoolWithoutUsableBlock) {
  PlanInputs in = qwen_on("rtx4090");
  in.max_model_len = 16;  // one block: the planner accepts a 1-block pool, a replay cannot
  in.num_gpu_blocks_override = 1;
  // 0.26 starts with one block (the replay refuses it); 0.33's fit check holds the null block
  // back, so vLLM itself refuses to start.
  in.vllm_version = VllmVersion::kV0_26;
  EXPECT_THROW(plan_replay_pool(in), std::invalid_argument);
  in.vllm_version = VllmVersion::kV0_33;
  EXPECT_THROW(plan_replay_pool(in), DoesNotFitError);
  in.num_gpu_blocks_override = 2;
  const Plan plan = plan_replay_pool(in);
  EXPECT_EQ(formula_max_concurrency(plan), 2 * 16 / 16);
}

}  // namespace
}  // namespace kvsim
