// Pooling replica summaries into the cluster's ReplaySummary (ClusterResult::cluster.summary).
//
// Rules (docs/cluster.md): counts and token/time totals are summed (busy_ns: GPU-busy time of
// all replicas); sim_ns is the latest replica clock; peaks are maxima over replicas; per-step
// means, the running-requests histogram and its percentiles are over the union of all replicas'
// steps (so mean_running is the mean running per replica-step, comparable with the per-replica
// formula); pool shape, scheduler and backend names are one replica's (all are equal); rates are
// recomputed from the summed counters; latencies are left to the caller (over all requests).
// With one replica the result equals that replica's summary field for field.
#pragma once

#include <span>

#include "kvsim/sim/engine/replica_engine.h"

namespace kvsim {

// `summaries[i]` and `sums[i]` belong to replica i (finish()ed); at least one replica.
ReplaySummary merge_replica_summaries(std::span<const ReplaySummary> summaries,
                                      std::span<const ReplayStepSums> sums);

}  // namespace kvsim
