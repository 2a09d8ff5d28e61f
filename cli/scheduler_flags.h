// The scheduler flags shared by `kvsim replay`, `sweep`, `size` and `calibrate` (vLLM `vllm
// serve` names), registered and documented once, stored into the run room's SchedulerOptions.
// The batch limits (--max-num-seqs, --max-num-batched-tokens) are not here: replay takes one
// value, sweep and size a list.
#pragma once

#include <CLI/CLI.hpp>

#include "kvsim/run/scheduler_options.h"

namespace kvsim::cli {

// Registers --long-prefill-token-threshold, --[no-]enable-chunked-prefill,
// --[no-]enable-prefix-caching, --scheduling-policy, --watermark,
// --no-scheduler-reserve-full-isl, --num-lookahead-tokens, --[no-]async-scheduling and
// --step-time in group "Scheduler". `o` must outlive parsing.
void add_scheduler_options(CLI::App* app, run::SchedulerOptions& o);

}  // namespace kvsim::cli
