#include "kvsim/core/vllm_version.h"

namespace kvsim {

std::string_view to_string(VllmVersion v) {
  return v == VllmVersion::kV0_26 ? "0.26" : "0.33";
}

std::string_view release_string(VllmVersion v) {
  return v == VllmVersion::kV0_26 ? "0.26.0" : "0.33.0";
}

std::optional<VllmVersion> parse_vllm_version(std::string_view s) {
  for (VllmVersion v : {VllmVersion::kV0_26, VllmVersion::kV0_33}) {
    if (s == to_string(v) || s == release_string(v)) return v;
  }
  return std::nullopt;
}

VllmBehavior vllm_behavior(VllmVersion v) {
  VllmBehavior b;  // 0.26.0
  b.version = v;
  if (v == VllmVersion::kV0_26) return b;
  // 0.33.0
  b.prefix_cache_stats_at_admission = true;            // sched/scheduler.py:1508
  b.lone_request_ignores_threshold = true;             // sched/scheduler.py:754-769
  b.priority_preemption_continues = true;              // sched/scheduler.py:945-991
  b.threshold_capped_by_max_model_len = true;          // config/scheduler.py verify_max_model_len
  b.has_max_num_active_seqs = true;                    // config/scheduler.py:69
  b.has_long_prefill_token_threshold_adaptive = true;  // config/scheduler.py
  b.default_prefix_cache_retention_interval = 0;       // config/cache.py:275-281
  b.one_line_kv_cache_report = true;                   // v1/core/kv_cache_utils.py:1136-1154
  b.fit_check_holds_null_block = true;                 // v1/core/kv_cache_planning.py:1533-1555
  b.large_card_batched_tokens = 16384;                 // engine/arg_utils.py:2973
  return b;
}

std::string_view vllm_version_names() {
  return "0.26 or 0.33";
}

}  // namespace kvsim
