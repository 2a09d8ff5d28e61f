// One sweep grid point = one planned pool + one replay on the null backend.
#include <algorithm>
#include <cctype>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/replay.h"
#include "kvsim/sim/report.h"
#include "kvsim/sim/step_time_model.h"
#include "kvsim/sim/sweep.h"

namespace kvsim {

BatchLimits vllm_default_batch_limits(const GpuSpec& gpu) {
  std::string name = gpu.name;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool big = gpu.vram_gib >= 70 && name.find("a100") == std::string::npos;
  BatchLimits b;
  b.max_num_batched_tokens = big ? 8192 : 2048;
  b.max_num_seqs = std::min(big ? 1024 : 256, b.max_num_batched_tokens);
  return b;
}

std::vector<SequenceLengths> trace_lengths(const Trace& trace) {
  std::vector<SequenceLengths> v;
  v.reserve(trace.requests.size());
  for (const TraceRequest& r : trace.requests) v.push_back({r.input_tokens, r.output_tokens});
  return v;
}

SweepOutcome replay_sweep_point(const SweepBase& base, const Trace& trace,
                                const SweepPoint& point) {
  PlanInputs in = base.plan;
  if (point.block_size) in.block_size = *point.block_size;
  if (point.gpu_memory_utilization) in.gpu_memory_utilization = *point.gpu_memory_utilization;
  if (point.num_gpu_blocks) in.num_gpu_blocks_override = *point.num_gpu_blocks;
  if (point.kv_cache_dtype) in.kv_cache_dtype = *point.kv_cache_dtype;
  if (in.max_model_len == 0 && in.model.max_position_embeddings == 0) {
    in.max_model_len = default_max_model_len(trace);
  }
  const Plan plan = compute_plan(in);
  // Block 0 is vLLM's null block: a pool needs at least one more to hold any KV.
  if (plan.num_gpu_blocks < 2) {
    throw std::invalid_argument(fmt::format(
        "the KV pool has {} block(s) of {} tokens, {} usable (block 0 is the null block)",
        plan.num_gpu_blocks, plan.block_size, std::max<int64_t>(plan.num_gpu_blocks - 1, 0)));
  }
  if (plan.num_gpu_blocks > std::numeric_limits<int32_t>::max() ||
      plan.max_model_len > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument(fmt::format("pool of {} blocks / max_model_len {} too large",
                                            plan.num_gpu_blocks, plan.max_model_len));
  }
  const BatchLimits defaults = vllm_default_batch_limits(in.gpu);
  ReplayConfig rc;
  rc.scheduler = base.scheduler;
  rc.scheduler.block_size = static_cast<int32_t>(plan.block_size);
  rc.scheduler.num_gpu_blocks = static_cast<int32_t>(plan.num_gpu_blocks);
  rc.scheduler.max_model_len = static_cast<int32_t>(plan.max_model_len);
  rc.scheduler.max_num_batched_tokens = point.max_num_batched_tokens.value_or(
      base.max_num_batched_tokens.value_or(defaults.max_num_batched_tokens));
  rc.scheduler.max_num_seqs =
      point.max_num_seqs.value_or(base.max_num_seqs.value_or(defaults.max_num_seqs));
  rc.record_timeline = false;
  rc.record_requests = false;

  const auto step_time = make_step_time_model(base.step_time, in, plan);
  NullKvBackend backend;
  const ReplayResult result = run_replay(rc, trace, backend, *step_time);
  const ReplaySummary& s = result.summary;

  SweepOutcome o;
  o.block_size = rc.scheduler.block_size;
  o.num_gpu_blocks = plan.num_gpu_blocks;
  o.gpu_memory_utilization = plan.num_gpu_blocks_overridden ? 0.0 : plan.gpu_memory_utilization;
  o.kv_cache_dtype = plan.kv_cache_dtype;
  o.max_num_seqs = rc.scheduler.max_num_seqs;
  o.max_num_batched_tokens = rc.scheduler.max_num_batched_tokens;
  o.vllm_max_concurrency = plan.vllm_max_concurrency;
  o.formula_max_concurrency =
      plan.num_gpu_blocks_overridden
          ? pool_formula_concurrency(plan.num_gpu_blocks, plan.block_size, plan.max_model_len)
          : plan.max_concurrency;
  o.requests = s.requests;
  o.finished = s.finished;
  o.rejected = s.rejected;
  o.steps = s.steps;
  o.sim_seconds = static_cast<double>(s.sim_ns) * 1e-9;
  o.peak_running = s.peak_running;
  o.mean_running = s.mean_running;
  o.preemptions = s.preemptions;
  o.recomputed_tokens = s.recomputed_tokens;
  o.padding_tokens_mean = s.padding_tokens_mean;
  o.padding_fraction_mean = s.padding_fraction_mean;
  o.peak_kv_usage = s.peak_kv_usage;
  o.prefix_cache_hit_rate = s.prefix_cache_hit_rate;
  o.ttft_p50_s = s.latency.ttft.p50;
  o.ttft_p99_s = s.latency.ttft.p99;
  o.tpot_p50_s = s.latency.tpot.p50;
  o.tpot_p99_s = s.latency.tpot.p99;
  return o;
}

}  // namespace kvsim
