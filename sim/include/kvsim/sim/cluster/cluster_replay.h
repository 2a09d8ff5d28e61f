// Cluster replay: N engine replicas (each the vLLM-exact Scheduler + KVCacheManager + step-time
// model of run_replay) advancing on one shared integer-ns event clock, fed by a router.
//
// Clock: every event (an arrival, a replica's step end) is processed in time order; at equal
// times, arrivals are routed first (in trace order) and replicas then step in index order, so a
// run depends only on its inputs and the seed. A replica steps only when it has work; an idle
// replica costs nothing. Each replica follows run_replay's clock rules (replay.h) on its own
// requests, so --replicas 1 with any router gives exactly run_replay's result (summary, timeline
// and request records).
//
// Routing happens at arrival, once per request. The router sees each replica's state as of the
// last scrape: with router_staleness_ns = 0 the state right now; else the state at the last
// multiple of router_staleness_ns (a real router scrapes metrics periodically), plus the
// requests it routed itself since then (a router knows what it sent).
//
// Admission control (off by default): a request that would push the chosen replica's queue past
// max_waiting_requests or max_waiting_tokens is rejected with RejectReason-like reason
// "admission_queue_full" / "admission_token_limit" and never reaches a replica.
//
// Early stop (for `kvsim size`): with stop_when_slo_fails set, the replay stops as soon as the
// p99 verdict of that SLO is decided "fail" (more than floor(0.01 * requests) requests already
// violate a threshold: a request violates TTFT once its wait without a first token exceeds the
// threshold, whether or not it has finished). ClusterResult::stopped_early is then true and
// the percentiles cover what was measured.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvsim/core/kv_backend.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/traces/trace.h"

namespace kvsim {

enum class RouterPolicy : uint8_t {
  ROUND_ROBIN,        // replica i % N
  RANDOM,             // uniform, seeded
  LEAST_OUTSTANDING,  // fewest requests in the replica (waiting + running), lowest index wins
  LEAST_KV,           // lowest KV usage (used blocks / usable blocks)
  POWER_OF_TWO,       // two distinct random replicas, the one with fewer outstanding requests
  PREFIX_AFFINITY,    // consistent hashing of the first prompt blocks, with bounded load
  KV_AWARE,           // longest cached prefix held by a replica, weighted against its load
};
inline constexpr int kNumRouterPolicies = 7;

// "round-robin", "random", "least-outstanding", "least-kv", "power-of-two", "prefix-affinity",
// "kv-aware" (the --router names).
std::string_view to_string(RouterPolicy p);
// Throws std::invalid_argument listing the valid names.
RouterPolicy parse_router_policy(std::string_view name);

// Per-request latency objectives (seconds). A request meets the SLO when every set threshold
// holds for it; the p99 verdict holds when the p99 of every set metric is within its threshold.
struct SloSpec {
  std::optional<double> ttft_s;
  std::optional<double> tpot_s;
  std::optional<double> e2e_s;
  bool empty() const { return !ttft_s && !tpot_s && !e2e_s; }
};

// Why admission control refused a request (ClusterResult::admission_reason); NONE: it did not.
enum class AdmissionRejectReason : uint8_t { NONE, QUEUE_FULL, TOKEN_LIMIT };
inline constexpr int kNumAdmissionRejectReasons = 3;
// "none", "admission_queue_full", "admission_token_limit".
std::string_view to_string(AdmissionRejectReason r);

// The largest --replicas accepted (each replica holds a whole KV pool's bookkeeping).
inline constexpr int32_t kMaxClusterReplicas = 1024;

struct AdmissionControl {
  int64_t max_waiting_requests = 0;  // 0 = unlimited
  int64_t max_waiting_tokens = 0;    // prompt tokens waiting in the replica; 0 = unlimited
};

struct ClusterConfig {
  int32_t replicas = 1;
  RouterPolicy router = RouterPolicy::ROUND_ROBIN;
  uint64_t seed = 0;                // RANDOM, POWER_OF_TWO, PREFIX_AFFINITY's ring
  int64_t router_staleness_ns = 0;  // 0 = the router sees current state
  AdmissionControl admission;
  // PREFIX_AFFINITY: hash of the first `affinity_prefix_blocks` blocks of the prompt; bounded
  // load: a replica may hold at most ceil(affinity_load_factor * mean outstanding) requests
  // before the request walks to the next replica on the ring (consistent hashing with bounded
  // loads). 64 blocks (1024 tokens at block size 16): a key must reach past a prompt template
  // shared by every request (the Mooncake trace's first 512 tokens) to tell conversations apart;
  // a prompt with fewer full blocks is keyed on all of them (docs/cluster.md).
  int32_t affinity_prefix_blocks = 64;
  double affinity_load_factor = 1.25;
  // KV_AWARE: score = cached_prefix_tokens / prompt_tokens - kv_aware_load_weight * load, load =
  // outstanding / max outstanding over replicas; highest score wins, lowest index on ties.
  double kv_aware_load_weight = 1.0;
  SloSpec slo;                                 // goodput / attainment (empty: not reported)
  std::optional<SloSpec> stop_when_slo_fails;  // early stop, see above
};

// Cluster-wide SLO outcome (over all trace requests; rejected ones do not meet it).
struct SloReport {
  int64_t met = 0;
  double attainment = 0;     // met / requests
  double goodput_rps = 0;    // met / sim seconds
  bool p99_verdict = false;  // every set metric's p99 within its threshold
  // Requests violating each threshold (0 when unset). The verdict ranks every trace request:
  // a rejected (or, after an early stop, undecided) request counts as violating, so a metric's
  // p99 holds iff its violations <= slo_p99_allowance(population).
  int64_t ttft_violations = 0;
  int64_t tpot_violations = 0;  // population: requests of max_tokens >= 2 (TPOT needs 2 tokens)
  int64_t e2e_violations = 0;
};

struct ClusterResult {
  // The whole cluster under run_replay's names: counts summed, latencies over all requests,
  // concurrency and KV usage pooled over every replica's steps (docs/cluster.md, cluster_summary.h).
  ReplayResult cluster;
  std::vector<ReplaySummary> per_replica;
  std::vector<int32_t> request_replica;  // per trace request; -1 = refused by admission control,
                                         // -2 = never routed (the replay stopped early)
  std::vector<AdmissionRejectReason> admission_reason;  // per trace request
  std::vector<int32_t> timeline_replica;  // per row of cluster.timeline: the replica that stepped
  int64_t admission_rejected = 0;         // also counted in cluster.summary.rejected
  std::array<int64_t, kNumAdmissionRejectReasons> admission_rejected_by_reason{};
  SloReport slo;
  bool stopped_early = false;
};

// Builds one backend per replica (the null backend for a plain replay).
using ReplicaBackendFactory = std::function<std::unique_ptr<KvBackend>(int32_t replica)>;

// Throws std::invalid_argument for a bad cluster config (replicas < 1, load factor < 1, ...),
// and what run_replay throws.
ClusterResult run_cluster_replay(const ReplayConfig& config, const ClusterConfig& cluster,
                                 const Trace& trace, const ReplicaBackendFactory& backends,
                                 const StepTimeModel& step_time,
                                 const ProgressCallback& progress = {});

inline constexpr int32_t kRefusedByAdmission = -1;
inline constexpr int32_t kNotRouted = -2;

// Throws std::invalid_argument naming the field of a bad ClusterConfig: replicas outside
// [1, kMaxClusterReplicas], negative staleness or admission limits, affinity_prefix_blocks < 1,
// affinity_load_factor < 1, a negative or non-finite kv_aware_load_weight, an SLO threshold that
// is not a finite number > 0.
void check_cluster_config(const ClusterConfig& cluster);

}  // namespace kvsim
