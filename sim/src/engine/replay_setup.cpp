// The shared replay configuration builder (replay_setup.h).
#include "kvsim/sim/engine/replay_setup.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim {
namespace {

int32_t to_i32(int64_t v, const char* what) {
  if (v < 1 || v > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument(fmt::format("{} = {} is out of range [1, {}]", what, v,
                                            std::numeric_limits<int32_t>::max()));
  }
  return static_cast<int32_t>(v);
}

// Host swap slots in `gib` GiB: one slot holds one block of every layer.
int64_t host_swap_slots(double gib, int64_t bytes_per_block) {
  if (!std::isfinite(gib) || gib < 0) {
    throw std::invalid_argument(
        fmt::format("swap space {} GiB: must be a finite number >= 0", gib));
  }
  if (bytes_per_block <= 0) {
    throw std::invalid_argument(
        fmt::format("swap space: the planner gave {} bytes per block", bytes_per_block));
  }
  const long double bytes = static_cast<long double>(gib) * (1LL << 30);
  const long double slots = std::floor(bytes / static_cast<long double>(bytes_per_block));
  if (slots > static_cast<long double>(int64_t{1} << 40)) {
    throw std::invalid_argument(fmt::format("swap space {} GiB is too large", gib));
  }
  return static_cast<int64_t>(slots);
}

}  // namespace

BatchLimits vllm_default_batch_limits(const GpuSpec& gpu, VllmVersion vllm_version) {
  // The planner's tiers (planner.h); with no max_model_len bound the token default is the tier's.
  const int64_t tokens = vllm_default_max_num_batched_tokens(
      gpu, std::numeric_limits<int64_t>::max(), std::nullopt, vllm_version);
  const bool big = tokens > 2048;
  BatchLimits b;
  b.max_num_batched_tokens = static_cast<int32_t>(tokens);
  b.max_num_seqs = std::min(big ? 1024 : 256, b.max_num_batched_tokens);
  return b;
}

void resolve_max_model_len(PlanInputs& in, const Trace& trace, bool model_is_default) {
  if (in.max_model_len == 0 && (model_is_default || in.model.max_position_embeddings == 0)) {
    in.max_model_len = default_max_model_len(trace);
  }
}

void resolve_max_model_len(PlanInputs& in, const TraceStream& trace, bool model_is_default) {
  if (in.max_model_len == 0 && (model_is_default || in.model.max_position_embeddings == 0)) {
    in.max_model_len = trace.default_max_model_len();
  }
}

Plan plan_replay_pool(const PlanInputs& in) {
  Plan plan = compute_plan(in);
  // Block 0 is vLLM's null block: a pool needs at least one more to hold any KV.
  if (plan.num_gpu_blocks < 2) {
    throw std::invalid_argument(fmt::format(
        "the KV pool has {} block(s) of {} tokens, {} usable (block 0 is the null block): lower "
        "the block size or give the cache more memory",
        plan.num_gpu_blocks, plan.block_size, std::max<int64_t>(plan.num_gpu_blocks - 1, 0)));
  }
  to_i32(plan.num_gpu_blocks, "num_gpu_blocks");
  to_i32(plan.block_size, "block_size");
  to_i32(plan.max_model_len, "max_model_len");
  return plan;
}

Plan plan_replay_pool(PlanInputs in, const ReplaySettings& settings) {
  if (settings.max_num_batched_tokens) in.max_num_batched_tokens = *settings.max_num_batched_tokens;
  if (settings.max_num_seqs) in.max_num_seqs = *settings.max_num_seqs;
  // make_replay_config's resolution: on unless SWAP preemption (refused there when explicit).
  in.async_scheduling = settings.async_scheduling.value_or(settings.scheduler.preemption_mode !=
                                                           PreemptionMode::SWAP);
  return plan_replay_pool(in);
}

ReplayConfig make_replay_config(const Plan& plan, const GpuSpec& gpu,
                                const ReplaySettings& settings) {
  ReplayConfig rc;
  SchedulerConfig& sc = rc.scheduler;
  sc = settings.scheduler;
  // The release the plan was made for decides the scheduler's and allocator's behaviour too.
  sc.behavior = vllm_behavior(plan.vllm_version);
  sc.num_gpu_blocks = to_i32(plan.num_gpu_blocks, "num_gpu_blocks");
  sc.block_size = to_i32(plan.block_size, "block_size");
  sc.max_model_len = to_i32(plan.max_model_len, "max_model_len");
  // The plan's KV layout. A single full-attention group stays implicit (the allocator's
  // specialised path, unchanged); any other layout drives the hybrid manager with the pool's
  // block count (a --num-gpu-blocks override included).
  sc.kv_cache_config = {};
  const KVCacheConfig& layout = plan.kv_cache_config;
  if (layout.kv_cache_groups.size() > 1 ||
      (layout.kv_cache_groups.size() == 1 &&
       layout.kv_cache_groups[0].kv_cache_spec.kind != KVCacheSpecKind::kFullAttention)) {
    sc.kv_cache_config.kv_cache_groups = layout.kv_cache_groups;
    sc.kv_cache_config.num_blocks = sc.num_gpu_blocks;
  }
  const BatchLimits defaults = vllm_default_batch_limits(gpu, plan.vllm_version);
  sc.max_num_seqs = settings.max_num_seqs.value_or(defaults.max_num_seqs);
  sc.max_num_batched_tokens =
      settings.max_num_batched_tokens.value_or(defaults.max_num_batched_tokens);
  if (!sc.enable_chunked_prefill && !settings.max_num_batched_tokens) {
    // vLLM: with chunked prefill off the default budget becomes max(L, default).
    sc.max_num_batched_tokens = std::max(sc.max_num_batched_tokens, sc.max_model_len);
  }
  const bool swap = sc.preemption_mode == PreemptionMode::SWAP;
  if (settings.async_scheduling.value_or(false) && swap) {
    throw std::invalid_argument(fmt::format(
        "{} cannot run with {}: vLLM V0's swap never ran with async scheduling (use {}, or leave "
        "the mode unset)",
        param_flag("async_scheduling", true), param("preemption_mode", "swap"),
        param_flag("async_scheduling", false)));
  }
  sc.async_scheduling = settings.async_scheduling.value_or(!swap);
  sc.num_host_swap_slots = 0;
  if (swap) {
    sc.num_host_swap_slots = host_swap_slots(settings.swap_space_gib, plan.bytes_per_block);
  }
  if (!std::isfinite(settings.swap_bandwidth_gbps) || settings.swap_bandwidth_gbps <= 0) {
    throw std::invalid_argument(fmt::format("swap bandwidth {} GB/s: must be a finite number > 0",
                                            settings.swap_bandwidth_gbps));
  }
  rc.swap_bytes_per_block = plan.bytes_per_block;
  rc.swap_bandwidth_bytes_per_s = settings.swap_bandwidth_gbps * 1e9;
  validate(sc);
  rc.record_timeline = settings.record_timeline;
  rc.record_requests = settings.record_requests;
  rc.check_invariants = settings.check_invariants;
  rc.steady_decode = settings.steady_decode;
  return rc;
}

int64_t formula_max_concurrency(const Plan& plan) {
  return plan.num_gpu_blocks_overridden
             ? pool_formula_concurrency(plan.num_gpu_blocks, plan.block_size, plan.max_model_len)
             : plan.max_concurrency;
}

}  // namespace kvsim
