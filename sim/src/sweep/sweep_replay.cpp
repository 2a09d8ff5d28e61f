// One sweep grid point = one planned pool + one replay on the null backend.
#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/sweep/sweep.h"

namespace kvsim {

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
  resolve_max_model_len(in, trace);
  ReplaySettings settings = base.settings;
  if (point.max_num_seqs) settings.max_num_seqs = point.max_num_seqs;
  if (point.max_num_batched_tokens) settings.max_num_batched_tokens = point.max_num_batched_tokens;
  settings.record_timeline = false;
  settings.record_requests = false;
  const Plan plan = plan_replay_pool(in, settings);
  const ReplayConfig rc = make_replay_config(plan, in.gpu, settings);

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
  o.formula_max_concurrency = formula_max_concurrency(plan);
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
