// The vLLM releases kvsim clones, and what differs between them.
//
// Every behavioural difference between the cloned releases is one field of VllmBehavior, set in
// one place (vllm_behavior(), core/src/vllm_version.cpp) with the release rule it follows. The
// rooms read the fields they need from their own configuration (SchedulerConfig::behavior,
// KVCacheManagerConfig::behavior, PlanInputs::vllm_version); no code outside vllm_version.cpp
// compares versions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvsim {

enum class VllmVersion : uint8_t { kV0_26, kV0_33 };

// What `vllm serve` users run today; --vllm-version / vllm_version= pick another.
inline constexpr VllmVersion kDefaultVllmVersion = VllmVersion::kV0_33;

// "0.26" / "0.33": the spelling flags, keywords, reports and golden files use.
std::string_view to_string(VllmVersion v);
// The release's full version string: "0.26.0" / "0.33.0".
std::string_view release_string(VllmVersion v);
// Accepts "0.26", "0.26.0", "0.33", "0.33.0"; nullopt for anything else.
std::optional<VllmVersion> parse_vllm_version(std::string_view s);
// "0.26 or 0.33", for error messages.
std::string_view vllm_version_names();

// Every behaviour that differs between the cloned releases (file:line evidence in
// docs/conformance.md). Defaults are 0.26's; vllm_behavior() gives each release's.
struct VllmBehavior {
  VllmVersion version = VllmVersion::kV0_26;

  // ---- Scheduler (sim/sched) ----
  // Prefix-cache counters: 0.26 records every WAITING-loop lookup (get_computed_blocks), retries
  // of a blocked head included; 0.33 records once, after allocate_slots admitted the request
  // (Scheduler.record_prefix_cache_stats).
  bool prefix_cache_stats_at_admission = false;
  // 0.33: long_prefill_token_threshold applies only while running + waiting > 1 at the start of
  // the step (a lone request prefills at the full budget).
  bool lone_request_ignores_threshold = false;
  // PRIORITY preemption. 0.26: the RUNNING loop's index moves back only when the victim was
  // scheduled this step, and a request that preempts itself ends the loop. 0.33: the index moves
  // back for any victim before it, and the loop goes on after a self-preemption.
  bool priority_preemption_continues = false;
  // 0.33: long_prefill_token_threshold > max_model_len is a configuration error.
  bool threshold_capped_by_max_model_len = false;

  // ---- Engine arguments the release has (others are refused) ----
  bool has_max_num_active_seqs = false;                    // 0.33 --max-num-active-seqs
  bool has_long_prefill_token_threshold_adaptive = false;  // 0.33

  // ---- KV cache manager (core) ----
  // (The retention interval itself is a setting of both releases: 0.33's
  // --prefix-cache-retention-interval, 0.26's VLLM_PREFIX_CACHE_RETENTION_INTERVAL variable.)
  // Sliding-window prefix-cache retention when none is given: -1 = dense (every full block is
  // hashed; 0.26, where VLLM_PREFIX_CACHE_RETENTION_INTERVAL is unset), 0 = sparse (0.33's
  // --prefix-cache-retention-interval default: only the blocks before the prompt's replay
  // boundary and shared-prefix junctions).
  int32_t default_prefix_cache_retention_interval = -1;

  // ---- Start-up (core/planner) ----
  // 0.33 prints one line "GPU KV cache size: N tokens, Maximum concurrency for L tokens per
  // request: X.XXx"; 0.26 printed two.
  bool one_line_kv_cache_report = false;
  // 0.33 checks the fit against available - one block (the null block): a max_model_len request
  // needing exactly num_gpu_blocks blocks is a start-up error; 0.26 starts (and never admits it).
  bool fit_check_holds_null_block = false;
  // 0.33 EngineArgs.get_batch_defaults: cards with >= 160 GiB get 16384 batched tokens under
  // `vllm serve` (0 = no such tier, 0.26).
  int64_t large_card_batched_tokens = 0;
};

VllmBehavior vllm_behavior(VllmVersion v);

}  // namespace kvsim
