// The cluster flags of `kvsim replay` (and, through add_router_options / add_slo_options, of
// `kvsim size`): replicas, router and its knobs, admission control, SLO thresholds
// (docs/cluster.md), stored into the run room's ClusterOptions, whose to_cluster_config checks
// the values.
#pragma once

#include <CLI/CLI.hpp>

#include "kvsim/run/cluster_options.h"

namespace kvsim::cli {

// --router, --router-staleness-ms, --router-seed, --affinity-prefix-blocks,
// --affinity-load-factor, --kv-aware-load-weight, --admission-max-waiting-requests,
// --admission-max-waiting-tokens (group "Cluster"). `o` must outlive parsing.
void add_router_options(CLI::App& app, run::ClusterOptions& o);
// --slo-ttft-p99, --slo-tpot-p99, --slo-e2e-p99 (seconds; group "SLO").
void add_slo_options(CLI::App& app, run::ClusterOptions& o);
// --replicas, the router options, the SLO options and --slo-stop-early.
void add_cluster_options(CLI::App& app, run::ClusterOptions& o);

// Whether any flag of the groups "Cluster" and "SLO" was given: the cluster engine then runs
// (even with --replicas 1); otherwise the plain replay, whose outputs stay those of kvsim before
// clusters existed.
bool cluster_flags_given(const CLI::App& cmd);

}  // namespace kvsim::cli
