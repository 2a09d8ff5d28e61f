// The cluster settings of replay (and, all but replicas and slo_stop_early, of size): replicas,
// router and its knobs, admission control, SLO thresholds (docs/cluster.md). Values are checked
// in to_cluster_config, whose errors name the parameter (core/param.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvsim/sim/cluster/cluster_replay.h"

namespace kvsim::run {

// Values as given; defaults are ClusterConfig's.
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
  bool slo_stop_early = false;  // stop once the p99 verdict is "fail"
};

// Throws std::invalid_argument "<param> V: ..." for a bad value: replicas outside [1, 1024], an
// unknown router (listing the valid names), a negative router_staleness_ms, negative admission
// limits, an SLO <= 0, slo_stop_early without an SLO, a router knob of another router.
ClusterConfig to_cluster_config(const ClusterOptions& o);

}  // namespace kvsim::run
