// Keyword arguments of the Python API -> the option structs the CLI fills from its flags.
//
// The Python layer (kvsim/__init__.py) checks types and value ranges and passes only the
// arguments the user gave, as dicts keyed by the CLI flag's name without dashes (vLLM's engine
// argument names: kv_cache_dtype, max_model_len, ...). Here each dict becomes the same struct
// the CLI builds (cli/plan_options.h, cli/scheduler_options.h, sim/trace.h), so a model, card or
// scheduler setting is resolved by the same code either way. A key that is not consumed is a
// programming error of the Python layer and raises TypeError naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>

#include "cluster_options.h"
#include "kvsim/sim/traces/trace.h"
#include "plan_options.h"
#include "scheduler_options.h"

namespace kvsim::python {

// The `kvsim replay` settings that are neither model/card nor scheduler policy flags.
struct ReplayOnlyOptions {
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  std::string backend = "null";
  int32_t backend_max_layers = 0;
  std::string preemption_mode = "recompute";
  double swap_space_gib = 4.0;
  double swap_bandwidth_gbps = 25.0;
  bool check_invariants = false;
  bool timeline = false;
  bool requests = false;
};

cli::PlanOptions plan_options_from(nanobind::dict kwargs);
cli::SchedulerOptions scheduler_options_from(nanobind::dict kwargs);
TraceReadOptions trace_options_from(nanobind::dict kwargs);
ReplayOnlyOptions replay_options_from(nanobind::dict kwargs);
// The cluster keywords of replay() and size() (cli/cluster_options.h's flags: replicas, router,
// router_staleness_ms, router_seed, affinity_*, kv_aware_load_weight, admission_*, slo_*_p99,
// slo_stop_early). Values are range-checked afterwards by cli::to_cluster_config, as the CLI's.
cli::ClusterOptions cluster_options_from(nanobind::dict kwargs);

}  // namespace kvsim::python
