// `replay`: one trace through vLLM's scheduler and KV allocator on one engine, or on a cluster of
// replicas behind a router. Both front ends call this: the CLI prints and writes files, Python
// converts the results; neither holds a rule of its own.
//
// Two phases, so that a front end can check its outputs between them (the CLI opens every output
// file after the configuration is known to be good and before the replay runs):
//   ReplayJob job = prepare_replay(options, trace, read_options);  // plan, pool, clock, backend
//   ReplayOutcome out = run_replay_job(job, progress, every);  // the replay itself
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "kvsim/core/kv_backend.h"
#include "kvsim/core/planner.h"
#include "kvsim/cuda/backend_factory.h"
#include "kvsim/run/cluster_options.h"
#include "kvsim/run/plan_options.h"
#include "kvsim/run/scheduler_options.h"
#include "kvsim/sim/cluster/cluster_replay.h"
#include "kvsim/sim/engine/replay.h"
#include "kvsim/sim/engine/step_time_model.h"
#include "kvsim/sim/report/report.h"
#include "kvsim/sim/traces/trace.h"
#include "kvsim/sim/traces/trace_stream.h"

namespace kvsim::run {

// vLLM V0's swap space per GPU and an effective PCIe 4.0 x16 host link.
inline constexpr double kDefaultSwapSpaceGib = 4.0;
inline constexpr double kDefaultSwapBandwidthGbps = 25.0;
// The metrics file and vLLM log (docs/metrics.md): a scrape every 15 s (Prometheus's sample
// configuration's scrape_interval), a log line every 10 s (vLLM's VLLM_LOG_STATS_INTERVAL), and
// simulated time 0 at the trace's own clock (Trace::clock_start_unix_ns: Azure's TIMESTAMP of
// the first request replayed) or, for a trace without one, 2025-01-01T00:00:00Z, unless a start
// is given.
inline constexpr double kDefaultMetricsIntervalS = 15.0;
inline constexpr double kDefaultVllmLogIntervalS = 10.0;
inline constexpr double kDefaultMetricsStartUnixS = 1735689600.0;

// Everything `replay` takes besides the trace. Optional values mean "not given".
struct ReplayOptions {
  PlanOptions plan;  // no model named: kDefaultModel (the report says "(default)")
  SchedulerOptions sched;
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  // Set: the cluster engine runs (any cluster or SLO setting given, even replicas=1); its
  // outputs are the cluster ones. Unset: the plain replay.
  std::optional<ClusterOptions> cluster;
  std::string backend = "null";               // null | host | cuda
  std::optional<int32_t> backend_max_layers;  // host/cuda: keep only this many layers (0 = all)
  std::string preemption_mode = "recompute";  // recompute | swap
  std::optional<double> swap_space_gib;       // swap mode only
  std::optional<double> swap_bandwidth_gbps;  // swap mode only
  bool check_invariants = false;
  bool steady_decode = true;  // speed only: outputs are identical either way
  bool record_timeline = false;
  bool record_requests = false;
  // The metrics file and vLLM log (ReplayOutcome::write_metrics / write_vllm_log); both need
  // record_timeline and record_requests.
  double metrics_interval = kDefaultMetricsIntervalS;  // s, a whole number of ms
  std::optional<double> metrics_start;  // Unix s of simulated time 0 (unset: the trace's clock)
  double vllm_log_interval = kDefaultVllmLogIntervalS;  // s, a whole number of ms
};

// The combination rules, before anything is read: swap_* need preemption_mode swap,
// backend_max_layers needs a host/cuda backend, a cluster of more than one replica runs the null
// backend only, value ranges of the swap settings, names of backend and preemption_mode. Throws
// std::invalid_argument naming the parameters (core/param.h).
void check_replay_options(const ReplayOptions& options);

// Whether a plain replay may stream this trace file (memory follows the requests in flight,
// plus one record a request where the records are kept: trace_stream.h) instead of reading it
// whole: no cluster, the null backend, a file that can be read twice.
bool replay_can_stream(const ReplayOptions& options, const std::string& trace_path);

// A configured replay: the plan, the engine configuration, the clock and the backend, and the
// report's context. Built by prepare_replay; holds references to the trace (and stream).
struct ReplayJob {
  ReplayOptions options;
  const Trace* trace = nullptr;   // the trace, or the stream's header
  TraceStream* stream = nullptr;  // set: the plain replay streams
  PlanInputs inputs;
  Plan plan;
  ReplayConfig config;
  std::optional<ClusterConfig> cluster;
  std::unique_ptr<StepTimeModel> step_time;
  KvBackendConfig backend_config;
  ReportContext context;
};

// check_replay_options, then: refuses an empty trace, resolves the model (kDefaultModel when none
// is named) and max_model_len, plans the pool, builds the engine configuration, the clock and the
// backend configuration, and fills the report context. `trace` was read with `read_options`;
// `stream` (may be null) replaces its requests (the trace is then the stream's header). Throws on
// bad values, naming the parameter.
ReplayJob prepare_replay(const ReplayOptions& options, const Trace& trace,
                         const TraceReadOptions& read_options, TraceStream* stream = nullptr);

// The replay's results and what the reports say of them.
struct ReplayOutcome {
  ReplayResult plain;                    // the plain replay (empty for a cluster)
  std::optional<ClusterResult> cluster;  // the cluster replay
  const ReplayJob* job = nullptr;
  bool timeline_streamed = false;  // the rows went to a TimelineSink: result().timeline is empty
  bool requests_streamed = false;  // the records went to a RequestSink: result().requests is empty

  const ReplayResult& result() const { return cluster ? cluster->cluster : plain; }
  ReplayResult& result() { return cluster ? cluster->cluster : plain; }
  // The human report and the JSON summary (the cluster ones for a cluster replay).
  std::string report() const;
  nlohmann::ordered_json summary_json() const;
  // The CSV/table columns beyond a plain replay's: `replica` in the timeline when more than one
  // replica ran; `replica` and `admission_reason` in the requests when more than one replica ran
  // or admission control refused a request. With one replica and no refusal the tables keep the
  // single-engine columns (the same bytes as a plain replay).
  bool timeline_has_replica() const;
  bool requests_have_cluster_columns() const;
  // A host/cuda backend whose verification failed: its detail; else empty.
  std::string verification_failure() const;
  // Every request rejected: the replay measured nothing. all_rejected_message() says why ("all 5
  // requests were rejected (5 prompt_too_long); max_model_len 64, 9 usable blocks of 16
  // tokens").
  bool all_rejected() const;
  std::string all_rejected_message() const;
  // The run as a vLLM server's Prometheus metrics (OpenMetrics text, sim/report/openmetrics.h:
  // one `engine` label per replica) and its periodic engine log (vllm_log.h), at the job's
  // metrics_interval / vllm_log_interval from metrics_start (unset: the trace's clock, else
  // kDefaultMetricsStartUnixS). Need the job's record_timeline and
  // record_requests (std::logic_error otherwise).
  void write_metrics(std::ostream& os) const;
  void write_vllm_log(std::ostream& os) const;
};

// Runs the replay. `progress` is called every `progress_every_steps` steps (0: the engine's
// default) and at the end; it is where a front end stops a run (by throwing). `timeline_sink`
// (plain replays with record_timeline only; std::invalid_argument for a cluster job): the rows go
// to it as the replay logs them (ReplayConfig::timeline_sink, e.g. a TimelineCsvWriter) and
// result().timeline stays empty, so the outcome's write_metrics / write_vllm_log refuse
// (timeline_streamed). `request_sink` likewise (plain replays with record_requests): the records
// go to it in trace order (ReplayConfig::request_sink, e.g. a RequestsCsvWriter) and
// result().requests stays empty (requests_streamed).
ReplayOutcome run_replay_job(const ReplayJob& job, const ProgressCallback& progress = {},
                             int64_t progress_every_steps = 0,
                             TimelineSink* timeline_sink = nullptr,
                             RequestSink* request_sink = nullptr);

}  // namespace kvsim::run
