// Keyword arguments of the Python API -> the run room's option structs (kvsim/run/), which the
// CLI fills from its flags.
//
// The Python layer (kvsim/__init__.py) checks types and passes only the arguments the user gave,
// as dicts keyed by the parameter ids (the CLI flag's name without dashes; vLLM's engine
// argument names: kv_cache_dtype, max_model_len, ...). Here each dict becomes the run room's
// struct, so a model, card or scheduler setting is resolved by the same code either way. A key
// that is not consumed is a programming error of the Python layer and raises TypeError naming
// it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "kvsim/run/cluster_options.h"
#include "kvsim/run/plan_options.h"
#include "kvsim/run/replay_job.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim::python {

run::PlanOptions plan_options_from(nanobind::dict kwargs);
run::SchedulerOptions scheduler_options_from(nanobind::dict kwargs);
TraceReadOptions trace_options_from(nanobind::dict kwargs);
// The replay-only keywords (batch limits, backend, preemption, swap, check_invariants, timeline,
// requests) into `o`, whose plan / sched / cluster parts the other dicts fill.
void take_replay_options(nanobind::dict kwargs, run::ReplayOptions& o);
// The cluster keywords of replay() and size() (replicas, router, router_staleness_ms,
// router_seed, affinity_*, kv_aware_load_weight, admission_*, slo_*_p99, slo_stop_early).
// Values are range-checked afterwards by run::to_cluster_config, as the CLI's.
run::ClusterOptions cluster_options_from(nanobind::dict kwargs);

// The run room's parameter table (kvsim/run/parameters.h) for the Python layer's type checks:
// {id: (group, kind, rule, choices)}, group plan / scheduler / replay / cluster, kind bool / int
// / uint64 / float / str / path, rule any / positive / non_negative / fraction_below_one / path;
// the router's choices are `router_names`.
nanobind::dict parameter_table(const std::vector<std::string>& router_names);

}  // namespace kvsim::python
