// Sweep over real replays: padding grows with block size and tracks the analytic expectation;
// parallel and sharded runs give the same bytes as a serial one.
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvsim/core/model_presets.h"
#include "kvsim/sim/sweep/sweep.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {
namespace {

// 300 requests, Poisson-ish arrivals every ~20 ms, prompts 50..2000, outputs 20..300 tokens.
Trace synthetic_trace() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> in(50, 2000), out(20, 300);
  std::exponential_distribution<double> gap(50.0);
  Trace t;
  t.path = "synthetic";
  double now = 0;
  for (int i = 0; i < 300; ++i) {
    TraceRequest r;
    r.arrival_ns = static_cast<int64_t>(now * 1e9);
    r.input_tokens = in(rng);
    r.output_tokens = out(rng);
    r.source_line = i + 2;
    t.requests.push_back(r);
    now += gap(rng);
  }
  return t;
}

SweepBase small_base() {
  SweepBase b;
  b.plan.model = find_model_preset("qwen2.5-7b");
  b.plan.gpu = find_gpu_preset("rtx4090");
  b.plan.max_model_len = 4096;
  b.step_time = "fixed:10";
  return b;
}

TEST(SweepReplay, PaddingGrowsWithBlockSizeAndMatchesExpectation) {
  const Trace trace = synthetic_trace();
  const auto lengths = trace_lengths(trace);
  const SweepBase base = small_base();
  SweepAxes axes;
  axes.block_sizes = {1, 8, 16, 32, 64, 128, 256};
  const auto points = expand_sweep(axes);
  const auto rows = run_sweep(
      points, [&](const SweepPoint& p) { return replay_sweep_point(base, trace, p); }, lengths, 2);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0].outcome.padding_tokens_mean, 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepOutcome& o = rows[i].outcome;
    EXPECT_EQ(o.block_size, axes.block_sizes[i]);
    EXPECT_EQ(o.finished, 300);
    if (i > 0) {
      EXPECT_GT(o.padding_fraction_mean, rows[i - 1].outcome.padding_fraction_mean) << i;
      EXPECT_GT(rows[i].expected.fraction, rows[i - 1].expected.fraction) << i;
    }
    // Measured padding per live sequence is close to the analytic one (prefill chunks and the
    // ratio-of-means make them differ a little) and both are near (bs - 1) / 2.
    const double per_seq = o.mean_running > 0 ? o.padding_tokens_mean / o.mean_running : 0;
    const double bs = o.block_size;
    EXPECT_NEAR(per_seq, rows[i].expected.per_seq, 0.1 * bs + 0.5) << bs;
    EXPECT_NEAR(rows[i].expected.per_seq, (bs - 1) / 2, 0.1 * bs + 0.5) << bs;
  }
}

TEST(SweepReplay, JobsAndShardsGiveIdenticalCsv) {
  const Trace trace = synthetic_trace();
  const auto lengths = trace_lengths(trace);
  const SweepBase base = small_base();
  SweepAxes axes;
  axes.block_sizes = {16, 64};
  axes.num_gpu_blocks = {300, 2000};
  axes.max_num_seqs = {8, 64};
  const auto points = expand_sweep(axes);
  const auto runner = [&](const SweepPoint& p) { return replay_sweep_point(base, trace, p); };
  const auto csv = [&](int jobs, ShardSpec shard) {
    std::ostringstream s;
    write_sweep_csv(s, run_sweep(points, runner, lengths, jobs, shard),
                    static_cast<int64_t>(points.size()));
    return s.str();
  };
  const std::string serial = csv(1, {});
  EXPECT_EQ(csv(3, {}), serial);
  const std::vector<NamedText> shards{
      {"s1", csv(2, {1, 3})}, {"s0", csv(1, {0, 3})}, {"s2", csv(2, {2, 3})}};
  EXPECT_EQ(merge_sweep_csvs(shards), serial);
  // The small pool preempts, the large one does not; max_num_seqs caps concurrency.
  const auto rows = run_sweep(points, runner, lengths, 2);
  EXPECT_GT(rows[1].outcome.preemptions + rows[0].outcome.preemptions, 0);  // bs 16, 300 blocks
  for (const SweepRow& r : rows) EXPECT_LE(r.outcome.peak_running, r.outcome.max_num_seqs);
}

// vLLM's "chunked prefill off -> default budget = max(L, default)" rule holds for every grid
// point (it used to exist only in `kvsim replay`, so such a sweep failed validation everywhere).
TEST(SweepReplay, ChunkedPrefillOffRaisesTheDefaultBudgetToMaxModelLen) {
  const Trace trace = synthetic_trace();
  const auto lengths = trace_lengths(trace);
  SweepBase base = small_base();  // rtx4090: default budget 2048 < max_model_len 4096
  base.settings.scheduler.enable_chunked_prefill = false;
  SweepAxes axes;
  axes.block_sizes = {16, 32};
  const auto points = expand_sweep(axes);
  const auto rows = run_sweep(
      points, [&](const SweepPoint& p) { return replay_sweep_point(base, trace, p); }, lengths, 1);
  ASSERT_EQ(rows.size(), 2u);
  for (const SweepRow& r : rows) {
    EXPECT_EQ(r.outcome.max_num_batched_tokens, 4096);
    EXPECT_EQ(r.outcome.finished, 300);
  }
  // An explicit budget below max_model_len is still refused, as vLLM does.
  SweepAxes small;
  small.max_num_batched_tokens = {2048};
  const auto small_points = expand_sweep(small);
  EXPECT_THROW(replay_sweep_point(base, trace, small_points[0]), std::invalid_argument);
}

TEST(SweepReplay, VllmDefaultBatchLimits) {
  for (VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    SCOPED_TRACE(std::string(to_string(v)));
    const BatchLimits h100 = vllm_default_batch_limits(find_gpu_preset("h100-80g"), v);
    EXPECT_EQ(h100.max_num_batched_tokens, 8192);
    EXPECT_EQ(h100.max_num_seqs, 1024);
    const BatchLimits a100 = vllm_default_batch_limits(find_gpu_preset("a100-80g"), v);
    EXPECT_EQ(a100.max_num_batched_tokens, 2048);
    EXPECT_EQ(a100.max_num_seqs, 256);
    const BatchLimits rtx = vllm_default_batch_limits(find_gpu_preset("rtx4090"), v);
    EXPECT_EQ(rtx.max_num_batched_tokens, 2048);
  }
  // vLLM 0.33's tier for cards of >= 160 GiB (b200: 180 GiB): 16384 tokens, 1024 sequences.
  const BatchLimits b200_26 =
      vllm_default_batch_limits(find_gpu_preset("b200"), VllmVersion::kV0_26);
  EXPECT_EQ(b200_26.max_num_batched_tokens, 8192);
  const BatchLimits b200 = vllm_default_batch_limits(find_gpu_preset("b200"), VllmVersion::kV0_33);
  EXPECT_EQ(b200.max_num_batched_tokens, 16384);
  EXPECT_EQ(b200.max_num_seqs, 1024);
}

}  // namespace
}  // namespace kvsim
