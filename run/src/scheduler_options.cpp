#include "kvsim/run/scheduler_options.h"

#include <stdexcept>

#include <fmt/core.h>

#include "kvsim/core/param.h"

namespace kvsim::run {

void apply(const SchedulerOptions& o, SchedulerConfig& c) {
  c.long_prefill_token_threshold = o.long_prefill_token_threshold;
  c.enable_chunked_prefill = o.enable_chunked_prefill;
  c.enable_prefix_caching = o.enable_prefix_caching;
  if (o.policy != "fcfs" && o.policy != "priority") {
    throw std::invalid_argument(fmt::format("{}: unknown value '{}' (expected fcfs or priority)",
                                            param("scheduling_policy"), o.policy));
  }
  c.policy = o.policy == "priority" ? SchedulingPolicy::PRIORITY : SchedulingPolicy::FCFS;
  c.watermark = o.watermark;
  c.scheduler_reserve_full_isl = o.scheduler_reserve_full_isl;
  c.num_lookahead_tokens = o.num_lookahead_tokens;
  c.max_num_active_seqs = o.max_num_active_seqs.value_or(0);
  if (o.max_num_active_seqs && *o.max_num_active_seqs < 1) {
    throw std::invalid_argument(fmt::format("{} must be >= 1 (got {})",
                                            param("max_num_active_seqs"), *o.max_num_active_seqs));
  }
  c.long_prefill_token_threshold_adaptive = o.long_prefill_token_threshold_adaptive;
  c.prefix_cache_retention_interval = o.prefix_cache_retention_interval;
}

void apply(const SchedulerOptions& o, ReplaySettings& settings) {
  apply(o, settings.scheduler);
  settings.async_scheduling = o.async_scheduling;
}

}  // namespace kvsim::run
