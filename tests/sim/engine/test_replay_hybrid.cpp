// Hybrid KV layouts in the replay (issue 9): a gpt-oss-20b-like model (24 layers alternating
// sliding-window-128 and full attention: two groups of 12 layers) against the same model treated
// as full attention, with the same KV memory. The hybrid pool's block holds one group's page of 12
// layers, the full-attention pool's block 24 layers' pages, so the hybrid pool has twice the
// blocks; its window group keeps only ~W tokens per request, so more requests run at once.
#include <gtest/gtest.h>

#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {
namespace {

Trace long_prompts() {
  Trace t;
  for (int i = 0; i < 120; ++i) {
    TraceRequest r;
    r.arrival_ns = int64_t{i} * 1'000'000;
    r.input_tokens = 1500 + (i * 37) % 800;
    r.output_tokens = 64 + (i * 13) % 128;
    t.requests.push_back(r);
  }
  return t;
}

ReplayConfig config(int32_t blocks) {
  ReplayConfig c;
  c.scheduler.num_gpu_blocks = blocks;
  c.scheduler.block_size = 16;
  c.scheduler.max_model_len = 4096;
  c.scheduler.max_num_batched_tokens = 512;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.async_scheduling = true;
  c.check_invariants = true;
  return c;
}

KVCacheConfig gpt_oss_like(int32_t blocks) {
  KVCacheConfig kv;
  kv.num_blocks = blocks;
  KVCacheGroupSpec sliding;
  KVCacheGroupSpec full;
  for (int32_t l = 0; l < 24; ++l) (l % 2 == 0 ? sliding : full).layer_indices.push_back(l);
  sliding.kv_cache_spec = {KVCacheSpecKind::kSlidingWindow, 16, 4096, 128, 0};
  full.kv_cache_spec = {KVCacheSpecKind::kFullAttention, 16, 4096, 0, 0};
  kv.kv_cache_groups = {sliding, full};
  return kv;
}

TEST(ReplayHybrid, GptOssLikeRunsMoreRequestsThanFullAttentionInTheSameMemory) {
  constexpr int32_t kFullBlocks = 801;  // 800 usable blocks of 24 layers' pages
  const Trace trace = long_prompts();
  FixedStepTime step(10.0);
  NullKvBackend null;

  const ReplayResult full = run_replay(config(kFullBlocks), trace, null, step);
  ReplayConfig hc = config(2 * kFullBlocks - 1);  // same bytes: blocks of 12 layers' pages
  hc.scheduler.kv_cache_config = gpt_oss_like(hc.scheduler.num_gpu_blocks);
  const ReplayResult hybrid = run_replay(hc, trace, null, step);

  EXPECT_EQ(full.summary.finished, 120);
  EXPECT_EQ(hybrid.summary.finished, 120);
  EXPECT_TRUE(full.summary.kv_cache_groups.empty());
  ASSERT_EQ(hybrid.summary.kv_cache_groups.size(), 2u);
  EXPECT_EQ(hybrid.summary.kv_cache_groups[0].kind, "sliding_window");
  EXPECT_EQ(hybrid.summary.kv_cache_groups[0].window, 128);
  EXPECT_EQ(hybrid.summary.kv_cache_groups[0].num_layers, 12);
  // The freed-window blocks are accounted, all in the window group.
  EXPECT_GT(hybrid.summary.window_blocks_freed, 0);
  EXPECT_EQ(hybrid.summary.kv_cache_groups[0].blocks_freed_out_of_window,
            hybrid.summary.window_blocks_freed);
  EXPECT_EQ(hybrid.summary.kv_cache_groups[1].blocks_freed_out_of_window, 0);
  // The window group holds far less than the full group.
  EXPECT_LT(hybrid.summary.kv_cache_groups[0].mean_kv_usage,
            0.5 * hybrid.summary.kv_cache_groups[1].mean_kv_usage);
  // Higher concurrency than the same model as full attention.
  EXPECT_GT(hybrid.summary.peak_running, full.summary.peak_running);
  EXPECT_GT(hybrid.summary.mean_running, 1.3 * full.summary.mean_running);
  EXPECT_LT(hybrid.summary.sim_ns, full.summary.sim_ns);
}

// Since b05f7ef any backend replays a hybrid layout (the backend refuses, per batch, tables that
// do not match its own groups): run_replay no longer refuses it up front.
TEST(ReplayHybrid, DeviceBackendsTakeHybridLayouts) {
  ReplayConfig hc = config(100);
  hc.scheduler.kv_cache_config = gpt_oss_like(100);
  class Fake final : public KvBackend {
   public:
    const char* name() const override { return "fake"; }
    StepExecution execute(const StepBatch&) override { return {}; }
  } fake;
  FixedStepTime step(10.0);
  const ReplayResult r = run_replay(hc, long_prompts(), fake, step);
  EXPECT_EQ(r.summary.finished + r.summary.rejected, r.summary.requests);
}

}  // namespace
}  // namespace kvsim
