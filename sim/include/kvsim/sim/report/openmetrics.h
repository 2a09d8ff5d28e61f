// A replay as a vLLM server's Prometheus metrics and periodic engine log (docs/metrics.md).
//
// write_openmetrics turns the records of a replay (the timeline rows and request records, one
// set per engine; a cluster replay gives one per replica) into an OpenMetrics text file with
// vLLM 0.26's own metric names, types, label sets and histogram buckets, as a Prometheus scrape
// every `interval_ns` of simulated time would have recorded them. Timestamps are start_unix_ns +
// simulated time. The names, buckets and labels are those of vLLM 0.26.0's
// vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__ (recorded in
// PrometheusStatLogger.record); the list is in openmetrics.cpp.
//
// Sampling rule (the same for the vLLM log, vllm_log.h), at scrape time T (simulated ns):
//   * gauges (running, waiting, KV usage) are those of the step in progress at T: the latest
//     timeline row that started at or before T, when T is before its end (time + duration).
//     Between steps the engine is idle (the replay clock leaves a gap only when nothing runs or
//     waits) and they read 0, as vLLM's do after the step in which the last request finished;
//     so before the first step and after the last;
//   * counters and histograms count every event at or before T: a step's preemptions and its
//     iteration tokens at the step's end (time + duration), a request's prompt tokens and TTFT
//     at its first token, its prefix-cache query/hit at its first scheduling, its success,
//     e2e latency, queue time and inter-token latencies at its finish, its generated tokens
//     spread evenly from its first token to its finish (kvsim keeps no per-token time).
// Scrapes are at 0, interval, 2*interval, ... up to and including the first at or after the end
// of the run, so the last scrape holds the complete counts.
// Determinism: the bytes depend only on the inputs.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kvsim/sim/engine/replay.h"

namespace kvsim {

// The records of one engine (vLLM's `engine` label value is its index in the list).
struct EngineRecords {
  std::span<const TimelineRow> timeline;
  std::span<const RequestRecord> requests;
};

// A cluster replay's rows and records split by replica (rows/records of replica r in element
// r, in their order; requests with replica < 0, refused or never routed, go nowhere).
struct ReplicaRecords {
  std::vector<std::vector<TimelineRow>> timeline;
  std::vector<std::vector<RequestRecord>> requests;
  std::vector<EngineRecords> engines() const;
};
ReplicaRecords split_by_replica(std::span<const TimelineRow> timeline,
                                std::span<const int32_t> timeline_replica,
                                std::span<const RequestRecord> requests,
                                std::span<const int32_t> request_replica, int32_t replicas);

struct MetricsSampling {
  std::string model_name;     // vLLM's served_model_name: the `model_name` label
  int64_t interval_ns = 0;    // > 0, a whole number of milliseconds (Prometheus keeps ms)
  int64_t start_unix_ns = 0;  // the wall-clock time of simulated time 0 (>= 0)
};

// At most this many scrapes (the file would be tens of GB): a longer run needs a longer interval.
inline constexpr int64_t kMaxMetricsScrapes = 1'000'000;

// Writes the OpenMetrics text (ending with "# EOF\n"). Throws std::invalid_argument naming
// metrics_interval when the interval is not a positive whole number of ms or the run would give
// more than kMaxMetricsScrapes scrapes.
void write_openmetrics(std::ostream& os, std::span<const EngineRecords> engines,
                       const MetricsSampling& sampling);

}  // namespace kvsim
