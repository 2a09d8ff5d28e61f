// Measured vLLM latencies that `kvsim calibrate` fits a step-time model to (docs/calibrate.md).
//
// Every input becomes one MeasuredRun: the requests to replay (a Trace) and one or more
// MeasuredGroups, each a set of requests (those arriving in [from, to)) with the measured
// statistics of its TTFT, TPOT and end-to-end latency. Three inputs are read:
//   * `vllm bench serve --save-result --save-detailed` JSON: per request start time, prompt and
//     output length, TTFT and ITLs (E2E = TTFT + sum ITL); failed requests are skipped, counted.
//   * a per-request table, CSV (header) or JSONL: `arrival_s`, `prompt_tokens`, `output_tokens`
//     and either `ttft_s` + `e2e_s` (durations) or `first_token_s` + `last_token_s` (times on the
//     arrival clock).
//   * a run file (JSON, "format": "kvsim-calibration-run/1"): a kvsim trace, the run's engine
//     settings, and per-group aggregates (e.g. per load stage, as published for the H100 runs).
// TPOT is decode time per output token after the first: (E2E - TTFT) / (output - 1), over
// requests with output >= 2. Invariants of a MeasuredRun: groups non-empty; each group has at
// least one statistic; every statistic finite and > 0.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvsim/sim/traces/trace.h"

namespace kvsim {

// The statistics a group may carry, in this order everywhere (JSON keys "<name>_s").
enum class LatencyStat : uint8_t {
  kTtftMean,
  kTtftP50,
  kTtftP90,
  kTpotMean,
  kTpotP50,
  kTpotP90,
  kE2eMean,
  kE2eP50,
  kE2eP90,
};
inline constexpr int kNumLatencyStats = 9;
const char* to_string(LatencyStat s);

using LatencyStats = std::array<double, kNumLatencyStats>;  // NaN = not measured
inline LatencyStats no_stats() {
  LatencyStats s;
  s.fill(std::numeric_limits<double>::quiet_NaN());
  return s;
}

struct MeasuredGroup {
  std::string name;
  int64_t arrival_from_ns = 0;  // requests arriving in [from, to) on the trace's clock
  int64_t arrival_to_ns = std::numeric_limits<int64_t>::max();
  LatencyStats stats = no_stats();
};

// Engine settings a run file carries; absent ones come from the command line.
struct RunSettings {
  std::string model;   // preset name
  std::string config;  // HF config.json path (relative paths: to the run file's folder)
  std::string gpu;
  std::optional<int32_t> tensor_parallel_size;
  std::optional<int32_t> max_num_batched_tokens;
  std::optional<int32_t> max_num_seqs;
  std::optional<int32_t> max_model_len;
  std::optional<double> gpu_memory_utilization;
};

struct MeasuredRun {
  std::string path;
  std::string kind;  // "vllm-bench" | "requests" | "run"
  std::string trace_path;  // a run file's trace (as resolved); empty for the other kinds
  Trace trace;
  std::vector<MeasuredGroup> groups;
  RunSettings settings;
  uint64_t data_hash = 0;  // XXH3-64 of the file's bytes
  int64_t skipped_requests = 0;
};

// Reads one measurement file (format detected from content: a JSON object with "ttfts" is
// vllm-bench, one with "format" a run file, else a CSV/JSONL table). Throws std::invalid_argument
// naming file, line and field.
MeasuredRun read_measurements(const std::string& path);

// Statistics of one group computed from per-request values (seconds); used by the readers and by
// calibrate to compute kvsim's prediction the same way. Percentiles: linear interpolation
// between closest ranks (numpy's default).
struct RequestLatency {
  double ttft_s = 0;
  double e2e_s = 0;
  int32_t output_tokens = 0;
};
LatencyStats latency_stats(const std::vector<RequestLatency>& requests);

}  // namespace kvsim
