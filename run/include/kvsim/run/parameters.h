// The settings of plan, replay, sweep, size and calibrate that both front ends take, each
// declared once: its id (the Python keyword; the CLI flag is the id with dashes, core/param.h),
// the option field it fills, and the rule a given value obeys before it reaches the run room.
//
// The Python extension takes its keywords and exports this table for its type checks
// (python/src/options.cpp, python/kvsim/_options.py); the CLI registers one flag per entry
// (cli/*_flags.cpp), with its help text. A new setting is one entry here, used by the job that
// needs it, plus one line per front end (its flag; its keyword in the public signature).
//
// Order matters: it is the order in which each group's keywords are documented and checked.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "kvsim/run/cluster_options.h"
#include "kvsim/run/plan_options.h"
#include "kvsim/run/replay_job.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::run {

// The boundary rule of a given value (the run room and core check the rest, naming the
// parameter). kPath: a string naming a file.
enum class ValueRule : uint8_t { kAny, kPositive, kNonNegative, kFractionBelowOne, kPath };

struct Param {
  const char* id;
  ValueRule rule = ValueRule::kAny;
  std::span<const std::string_view> choices = {};  // non-empty: the only values accepted
};

inline constexpr std::array<std::string_view, 2> kSchedulingPolicies = {"fcfs", "priority"};
inline constexpr std::array<std::string_view, 3> kBackendNames = {"null", "host", "cuda"};
inline constexpr std::array<std::string_view, 2> kPreemptionModes = {"recompute", "swap"};
inline constexpr std::array<std::string_view, 8> kTraceFormatNames = {
    "auto", "azure", "vidur", "burstgpt", "mooncake", "bailian", "sharegpt", "kvsim"};
inline constexpr std::array<std::string_view, 3> kArrivalModeNames = {"trace", "all-at-once",
                                                                      "poisson"};

// visit(param, field) for every setting of the group; O is the options struct or const of it.
template <typename O, typename Visit>
void visit_plan_params(O& o, Visit&& visit) {
  visit(Param{"model"}, o.model);
  visit(Param{"config", ValueRule::kPath}, o.config_path);
  visit(Param{"num_layers", ValueRule::kPositive}, o.num_layers);
  visit(Param{"num_kv_heads", ValueRule::kPositive}, o.num_kv_heads);
  visit(Param{"head_dim", ValueRule::kPositive}, o.head_dim);
  visit(Param{"num_params", ValueRule::kPositive}, o.num_params);
  visit(Param{"dtype"}, o.dtype);
  visit(Param{"gpu"}, o.gpu);
  visit(Param{"vram_gib", ValueRule::kPositive}, o.vram_gib);
  visit(Param{"gpu_spec", ValueRule::kPath}, o.gpu_spec_path);
  visit(Param{"gpu_memory_utilization"}, o.gpu_memory_utilization);
  visit(Param{"overhead_gib"}, o.overhead_gib);
  visit(Param{"weights_gib"}, o.weights_gib);
  visit(Param{"quantization"}, o.quantization);
  visit(Param{"kv_cache_dtype"}, o.kv_cache_dtype);
  visit(Param{"tensor_parallel_size"}, o.tensor_parallel_size);
  visit(Param{"max_model_len", ValueRule::kPositive}, o.max_model_len);
  visit(Param{"block_size"}, o.block_size);
  visit(Param{"num_gpu_blocks_override"}, o.num_gpu_blocks_override);
  visit(Param{"kv_cache_memory_bytes", ValueRule::kPositive}, o.kv_cache_memory_bytes);
  visit(Param{"disable_hybrid_kv_cache_manager"}, o.disable_hybrid_kv_cache_manager);
  visit(Param{"vllm_version"}, o.vllm_version);
}

template <typename O, typename Visit>
void visit_scheduler_params(O& o, Visit&& visit) {
  visit(Param{"long_prefill_token_threshold", ValueRule::kNonNegative},
        o.long_prefill_token_threshold);
  visit(Param{"enable_chunked_prefill"}, o.enable_chunked_prefill);
  visit(Param{"enable_prefix_caching"}, o.enable_prefix_caching);
  visit(Param{"scheduling_policy", ValueRule::kAny, kSchedulingPolicies}, o.policy);
  visit(Param{"watermark", ValueRule::kFractionBelowOne}, o.watermark);
  visit(Param{"scheduler_reserve_full_isl"}, o.scheduler_reserve_full_isl);
  visit(Param{"num_lookahead_tokens", ValueRule::kNonNegative}, o.num_lookahead_tokens);
  visit(Param{"async_scheduling"}, o.async_scheduling);
  visit(Param{"step_time"}, o.step_time);
  visit(Param{"max_num_active_seqs", ValueRule::kPositive}, o.max_num_active_seqs);
  visit(Param{"long_prefill_token_threshold_adaptive"}, o.long_prefill_token_threshold_adaptive);
  visit(Param{"prefix_cache_retention_interval"}, o.prefix_cache_retention_interval);
}

// replay's own settings (ReplayOptions minus its plan / sched / cluster parts).
template <typename O, typename Visit>
void visit_replay_params(O& o, Visit&& visit) {
  visit(Param{"max_num_batched_tokens", ValueRule::kPositive}, o.max_num_batched_tokens);
  visit(Param{"max_num_seqs", ValueRule::kPositive}, o.max_num_seqs);
  visit(Param{"backend", ValueRule::kAny, kBackendNames}, o.backend);
  visit(Param{"backend_max_layers", ValueRule::kNonNegative}, o.backend_max_layers);
  visit(Param{"preemption_mode", ValueRule::kAny, kPreemptionModes}, o.preemption_mode);
  visit(Param{"swap_space_gib", ValueRule::kNonNegative}, o.swap_space_gib);
  visit(Param{"swap_bandwidth_gbps", ValueRule::kPositive}, o.swap_bandwidth_gbps);
  visit(Param{"check_invariants"}, o.check_invariants);
  visit(Param{"steady_decode"}, o.steady_decode);
  visit(Param{"timeline"}, o.record_timeline);
  visit(Param{"requests"}, o.record_requests);
  visit(Param{"metrics_interval", ValueRule::kPositive}, o.metrics_interval);
  visit(Param{"metrics_start", ValueRule::kNonNegative}, o.metrics_start);
  visit(Param{"vllm_log_interval", ValueRule::kPositive}, o.vllm_log_interval);
}

// The cluster settings (replay's cluster mode; size takes all but replicas and slo_stop_early).
// The router's names are cluster_replay.h's (router_policy_names()); to_cluster_config checks
// them and every range.
template <typename O, typename Visit>
void visit_cluster_params(O& o, Visit&& visit) {
  visit(Param{"replicas", ValueRule::kPositive}, o.replicas);
  visit(Param{"router"}, o.router);
  visit(Param{"router_staleness_ms", ValueRule::kNonNegative}, o.router_staleness_ms);
  visit(Param{"router_seed"}, o.router_seed);
  visit(Param{"affinity_prefix_blocks", ValueRule::kPositive}, o.affinity_prefix_blocks);
  visit(Param{"affinity_load_factor"}, o.affinity_load_factor);
  visit(Param{"kv_aware_load_weight", ValueRule::kNonNegative}, o.kv_aware_load_weight);
  visit(Param{"admission_max_waiting_requests", ValueRule::kNonNegative},
        o.admission_max_waiting_requests);
  visit(Param{"admission_max_waiting_tokens", ValueRule::kNonNegative},
        o.admission_max_waiting_tokens);
  visit(Param{"slo_ttft_p99", ValueRule::kPositive}, o.slo_ttft_p99);
  visit(Param{"slo_tpot_p99", ValueRule::kPositive}, o.slo_tpot_p99);
  visit(Param{"slo_e2e_p99", ValueRule::kPositive}, o.slo_e2e_p99);
  visit(Param{"slo_stop_early"}, o.slo_stop_early);
}

// How a trace is read (format and arrival are the names parse_trace_format /
// parse_arrival_mode take; the enum fields are filled from them).
template <typename O, typename Visit>
void visit_trace_params(O& o, Visit&& visit) {
  visit(Param{"format", ValueRule::kAny, kTraceFormatNames}, o.format);
  visit(Param{"max_requests", ValueRule::kNonNegative}, o.max_requests);
  visit(Param{"start", ValueRule::kNonNegative}, o.start_s);
  visit(Param{"duration", ValueRule::kNonNegative}, o.duration_s);
  visit(Param{"time_scale", ValueRule::kPositive}, o.time_scale);
  visit(Param{"arrival", ValueRule::kAny, kArrivalModeNames}, o.arrival);
  visit(Param{"rate", ValueRule::kPositive}, o.rate);
  visit(Param{"seed"}, o.seed);
  visit(Param{"skip_bad_rows"}, o.skip_bad_rows);
  visit(Param{"max_input_bytes", ValueRule::kPositive}, o.limits.max_bytes);
  visit(Param{"max_line_bytes", ValueRule::kPositive}, o.limits.max_line_bytes);
  visit(Param{"hash_block_size", ValueRule::kPositive}, o.hash_block_size);
}

}  // namespace kvsim::run
