// The scheduler flags shared by `kvsim replay` and `kvsim sweep` (vLLM `vllm serve` names), so
// the two commands register, document and validate them identically. The batch limits
// (--max-num-seqs, --max-num-batched-tokens) are not here: replay takes one value, sweep a list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sched/scheduler.h"

namespace kvsim::cli {

// Raw flag values; defaults are vLLM 0.26's.
struct SchedulerOptions {
  int32_t long_prefill_token_threshold = 0;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  std::string policy = "fcfs";
  double watermark = 0.0;
  bool scheduler_reserve_full_isl = true;
  int32_t num_lookahead_tokens = 0;
  std::string step_time = "roofline";  // --step-time spec (docs/step-time-model.md)
  // --[no-]async-scheduling; unset = vLLM's default (on unless an incompatible option is set).
  std::optional<bool> async_scheduling;
};

// Registers --long-prefill-token-threshold, --[no-]enable-chunked-prefill,
// --[no-]enable-prefix-caching, --scheduling-policy, --watermark,
// --no-scheduler-reserve-full-isl, --num-lookahead-tokens, --[no-]async-scheduling and
// --step-time in group "Scheduler".
// `o` must outlive parsing.
void add_scheduler_options(CLI::App* app, SchedulerOptions& o);

// Copies the policy knobs into `config` (block/pool/length/batch fields are left alone).
void apply(const SchedulerOptions& o, SchedulerConfig& config);
// The same into settings.scheduler, plus the scheduling mode (settings.async_scheduling).
void apply(const SchedulerOptions& o, ReplaySettings& settings);

}  // namespace kvsim::cli
