// kvsim size's real SizeRunner: each candidate planned once (plan_replay_pool +
// make_replay_config, the rules of `kvsim replay`), each trial one cluster replay
// (run_cluster_replay) that stops as soon as its SLO verdict is "fail".
#pragma once

#include <string>

#include "kvsim/core/planner.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay_setup.h"
#include "kvsim/sim/sweep/size.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// What every candidate starts from; a candidate overrides the card, TP, KV dtype and, when
// given, block size and max_num_seqs. `cluster.replicas` is ignored (the search sets it),
// `cluster.slo` must not be empty.
struct SizeBase {
  PlanInputs plan;          // model, utilization, overhead, max_model_len (resolved), ...
  ReplaySettings settings;  // scheduler knobs; records are never kept
  std::string step_time = "roofline";
  ClusterConfig cluster;  // router, seed, staleness, admission control, SLO
  // Stop a trial's replay once its verdict is "fail" (ClusterConfig::stop_when_slo_fails). The
  // verdict is the same either way; only the p99s of failing trials become partial.
  bool early_stop = true;
};

// Plans `candidate`: DoesNotFitError (and a pool of fewer than 2 blocks) becomes
// "does not fit: ...", a PlanError "invalid: ..."; errors in the scheduler settings
// (make_replay_config) are thrown. The returned trial replays `trace` (which must outlive it)
// on the null backend. mean_running_per_replica is the mean number of running sequences over
// the steps of all replicas (a step-weighted mean of the replicas' mean_running).
CandidateSetup prepare_size_candidate(const SizeBase& base, const Trace& trace,
                                      const SizeCandidate& candidate);

}  // namespace kvsim
