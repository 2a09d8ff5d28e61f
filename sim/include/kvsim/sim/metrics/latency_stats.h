// Latency statistics from the replay's simulated clock: nearest-rank percentiles and per-metric
// summaries of TTFT, TPOT, end-to-end latency and queueing delay.
//
// Definitions (per finished request; times are the replay clock's integer nanoseconds, results
// are seconds):
//   TTFT     = first_token - arrival
//   TPOT     = (finish - first_token) / (output_tokens - 1), only for output_tokens >= 2
//              (kvsim records no per-token times, so ITL is reported as this per-request mean)
//   e2e      = finish - arrival
//   queueing = first_scheduled - arrival
// Percentile (nearest rank, as in traces/README.md): sorted[ceil(q * n) - 1], q in [0, 1],
// q = 0 gives the minimum; ceil is taken with a 1e-9 relative tolerance so that q * n that is an
// integer up to floating-point error (0.07 * 100) is not rounded up to the next rank.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvsim {

// The nearest-rank percentile's 0-based index into n ascending values: ceil(q * n) - 1 with the
// tolerance above, clamped to [0, n - 1]. Used for latencies and for the replay's
// running-requests histogram alike. Throws std::invalid_argument if n == 0 or q is outside [0, 1].
int64_t nearest_rank_index(double q, int64_t n);

// Nearest-rank percentile of an ascending-sorted range. Throws std::invalid_argument if `sorted`
// is empty or q is outside [0, 1].
double percentile_sorted(std::span<const double> sorted, double q);

// Summary of one latency metric. count == 0 means "no samples" and every statistic is 0.
struct LatencySummary {
  int64_t count = 0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};

// Sorts `values` in place and summarises them (no allocation).
LatencySummary summarize_latencies(std::span<double> values);

// The timestamps of one finished request, in replay-clock nanoseconds.
// Precondition: arrival <= first_scheduled <= first_token <= finish, output_tokens >= 1.
struct RequestTimestamps {
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = 0;
  int64_t first_token_ns = 0;
  int64_t finish_ns = 0;
  int64_t output_tokens = 0;
};

struct LatencyReport {
  LatencySummary ttft;
  LatencySummary tpot;
  LatencySummary e2e;
  LatencySummary queueing;
};

// Collects finished requests and summarises them. Usage:
//   LatencyCollector c; c.reserve(n);
//   for (each finished request) c.add({arrival, first_scheduled, first_token, finish, out});
//   LatencyReport r = c.report();
// add() appends four doubles (no allocation after reserve); report() sorts its buffers in place
// and may be called again after more add()s. Throws std::invalid_argument from add() when the
// timestamps are out of order or output_tokens < 1.
class LatencyCollector {
 public:
  void reserve(size_t num_requests);
  void add(const RequestTimestamps& t);
  LatencyReport report();
  size_t size() const noexcept { return e2e_.size(); }

 private:
  std::vector<double> ttft_, tpot_, e2e_, queueing_;
};

}  // namespace kvsim
