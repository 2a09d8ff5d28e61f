// The scheduler settings of replay, sweep and size (vLLM `vllm serve` names), as given, and how
// they enter the scheduler configuration. The batch limits (max_num_seqs,
// max_num_batched_tokens) are not here: replay takes one value, sweep and size a list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sched/scheduler.h"

namespace kvsim::run {

// Defaults are vLLM 0.26's.
struct SchedulerOptions {
  int32_t long_prefill_token_threshold = 0;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  std::string policy = "fcfs";  // scheduling_policy: fcfs | priority
  double watermark = 0.0;
  bool scheduler_reserve_full_isl = true;
  int32_t num_lookahead_tokens = 0;
  std::string step_time = "roofline";  // step_time spec (docs/step-time-model.md)
  // Unset = vLLM's default (on unless an incompatible option is set).
  std::optional<bool> async_scheduling;
  // vLLM 0.33's; the first two are refused for a release without them (validate()).
  std::optional<int32_t> max_num_active_seqs;
  bool long_prefill_token_threshold_adaptive = false;
  // -1 = none (dense); unset: the release's default.
  std::optional<int32_t> prefix_cache_retention_interval;
};

// Copies the policy knobs into `config` (block/pool/length/batch fields are left alone). Throws
// std::invalid_argument naming scheduling_policy for a policy other than fcfs / priority.
void apply(const SchedulerOptions& o, SchedulerConfig& config);
// The same into settings.scheduler, plus the scheduling mode (settings.async_scheduling).
void apply(const SchedulerOptions& o, ReplaySettings& settings);

}  // namespace kvsim::run
