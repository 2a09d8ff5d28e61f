// A replay as vLLM's periodic engine log (docs/metrics.md): the line vLLM 0.26.0's
// LoggingStatLogger.log (vllm/v1/metrics/loggers.py) writes every VLLM_LOG_STATS_INTERVAL
// (default 10 s, vllm/envs.py), with vLLM's default log format (vllm/logger.py, _FORMAT and
// _DATE_FORMAT: "INFO MM-DD HH:MM:SS [loggers.py:310] ") and simulated time stamps (UTC):
//
//   INFO 01-01 00:00:10 [loggers.py:310] Engine 000: Avg prompt throughput: 1234.5 tokens/s,
//   Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 3 reqs,
//   [Preemptions: 2, ]GPU KV cache usage: 45.6%, Prefix cache hit rate: 12.3%
//
// (one line). As vLLM: throughputs are over the interval since the last line (prompt: tokens
// computed, i.e. prompt minus prefix-cache hits, counted when the prefill completes);
// "Preemptions" only when the interval had some; the prefix cache hit rate is over the most
// recent 1000 requests (CachingMetrics); a line whose interval and the one before it produced no
// token is vLLM's debug level and left out. Running, Waiting and KV usage follow the sampling
// rule of openmetrics.h. One line per engine and instant, engines in order ("Engine 001: ...").
#pragma once

#include <ostream>
#include <span>

#include "kvsim/sim/report/openmetrics.h"

namespace kvsim {

// sampling.interval_ns: the log interval; model_name is not used. Throws std::invalid_argument
// naming vllm_log_interval for an interval that is not a positive whole number of ms or that
// gives more than kMaxMetricsScrapes lines per engine.
void write_vllm_log(std::ostream& os, std::span<const EngineRecords> engines,
                    const MetricsSampling& sampling);

}  // namespace kvsim
