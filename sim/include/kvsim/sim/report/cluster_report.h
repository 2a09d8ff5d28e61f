// Reports of a cluster replay (cluster_replay.h): the JSON summary, the human report, and the
// timeline / request CSVs with a `replica` column.
//
// JSON: every key of replay_summary_json (report.h) with the cluster-wide values under the same
// names (cluster_summary.h states how replicas pool), then, before the final `wall_seconds`:
// `replicas`, `router`, `router_staleness_ms`, `router_seed`, `admission_max_waiting_requests`,
// `admission_max_waiting_tokens`, `admission_rejected`, `admission_rejected_by_reason`,
// `stopped_early`, `slo` (only when an objective is set: thresholds, met, attainment,
// goodput_rps, p99_verdict, violations) and `per_replica` (one object per replica: `replica` and
// the summary keys of replay_summary_json, without the trace/model context and wall time).
// CSVs: the single-replica columns with `replica` first; a request refused by admission control
// has replica -1, status "rejected" and its admission reason; one never routed (an early stop)
// has replica -2.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/report/report.h"

namespace kvsim {

nlohmann::ordered_json cluster_summary_json(const ClusterResult& r, const ClusterConfig& cluster,
                                            const ReportContext& ctx);

// The single-replica report of the cluster-wide summary, then the cluster section: router and
// admission, one row per replica (requests, observed concurrency against the formula, KV usage,
// padding, preemptions, prefix hit rate, TTFT/TPOT/e2e p50 and p99), the SLO lines.
std::string format_cluster_report(const ClusterResult& r, const ClusterConfig& cluster,
                                  const ReportContext& ctx);

// Preconditions: replica.size() == rows.size() (ClusterResult::timeline_replica).
void write_cluster_timeline_csv(std::ostream& os, std::span<const TimelineRow> rows,
                                std::span<const int32_t> replica);
// Preconditions: records are the whole trace's (request_replica and admission_reason parallel).
void write_cluster_requests_csv(std::ostream& os, std::span<const RequestRecord> records,
                                std::span<const int32_t> request_replica,
                                std::span<const AdmissionRejectReason> admission_reason);

}  // namespace kvsim
