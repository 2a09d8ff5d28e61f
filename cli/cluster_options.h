// The cluster flags of `kvsim replay` (and, through add_router_options / add_slo_options, of
// `kvsim size`): replicas, router and its knobs, admission control, SLO thresholds
// (docs/cluster.md). Values are checked in to_cluster_config, whose errors name the flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "kvsim/sim/cluster/cluster_replay.h"

namespace kvsim::cli {

// Raw flag values; defaults are ClusterConfig's.
struct ClusterOptions {
  int32_t replicas = 1;
  std::string router = "round-robin";
  double router_staleness_ms = 0;
  uint64_t router_seed = 0;
  int64_t admission_max_waiting_requests = 0;
  int64_t admission_max_waiting_tokens = 0;
  int32_t affinity_prefix_blocks = 64;
  double affinity_load_factor = 1.25;
  double kv_aware_load_weight = 1.0;
  std::optional<double> slo_ttft_p99;
  std::optional<double> slo_tpot_p99;
  std::optional<double> slo_e2e_p99;
  bool slo_stop_early = false;  // --slo-stop-early: stop once the p99 verdict is "fail"
};

// --router, --router-staleness-ms, --router-seed, --affinity-prefix-blocks,
// --affinity-load-factor, --kv-aware-load-weight, --admission-max-waiting-requests,
// --admission-max-waiting-tokens (group "Cluster"). `o` must outlive parsing.
void add_router_options(CLI::App& app, ClusterOptions& o);
// --slo-ttft-p99, --slo-tpot-p99, --slo-e2e-p99 (seconds; group "SLO").
void add_slo_options(CLI::App& app, ClusterOptions& o);
// --replicas, the router options, the SLO options and --slo-stop-early.
void add_cluster_options(CLI::App& app, ClusterOptions& o);

// Throws std::invalid_argument "--FLAG V: ..." for a bad value: --replicas outside [1, 1024],
// an unknown --router (listing the valid names), a negative --router-staleness-ms, negative
// admission limits, an SLO <= 0, --slo-stop-early without an SLO, bad affinity/kv-aware knobs.
ClusterConfig to_cluster_config(const ClusterOptions& o);

// The flags that reproduce `c` in `kvsim replay` (values that differ from the defaults only;
// leading space per flag, "" for the default cluster), e.g. " --replicas 4 --router kv-aware".
std::string cluster_flags(const ClusterConfig& c);

}  // namespace kvsim::cli
